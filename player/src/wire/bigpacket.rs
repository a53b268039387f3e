pub const PORT: u16 = 5599;
pub const HEADER_LEN: usize = 32;
pub const MAX_PAYLOAD: usize = 65507 - HEADER_LEN;
