#![allow(dead_code)]
pub mod output;
pub mod player;
