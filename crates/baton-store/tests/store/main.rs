//! The SQLite store against real database files.

mod concurrency;
mod conformance;
mod crash;
mod open;
mod projections;
mod support;
