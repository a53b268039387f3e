#![allow(dead_code)]
pub mod fseq_writer;
pub mod output;
pub mod player;
pub mod wait;
