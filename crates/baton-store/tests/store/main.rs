//! The SQLite store against real database files.

mod concurrency;
mod conformance;
mod crash;
mod fold;
mod open;
mod projections;
mod queue;
mod support;
