//! FSEQ v1/v2 reader (xLights / FPP sequence files). Streams: only the block being
//! decoded is held in memory.
