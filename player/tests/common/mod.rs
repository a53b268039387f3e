#![allow(dead_code)]
pub mod player;
