//! Test patterns for commissioning: solid, chase, rainbow and an ID pattern.
