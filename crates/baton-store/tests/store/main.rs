//! The SQLite store against real database files.

mod concurrency;
mod crash;
mod driver;
mod open;
mod projections;
mod support;
