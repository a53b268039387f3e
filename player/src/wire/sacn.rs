pub const PORT: u16 = 5568;
