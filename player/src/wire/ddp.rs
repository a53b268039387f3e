pub const PORT: u16 = 4048;
