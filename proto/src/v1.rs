//! Generated code for package `boltwatch.v1`.
#![allow(missing_docs, clippy::all, clippy::pedantic)]

tonic::include_proto!("boltwatch.v1");
