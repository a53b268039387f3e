//! Channel ranges to each output's pixel buffer: colour order and brightness.
