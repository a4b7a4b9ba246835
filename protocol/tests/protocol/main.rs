//! cairn-protocol's integration tests (one binary): golden vectors, property
//! round trips, robustness of the decoders, version negotiation, pairing,
//! planning, batches and the record hash.

mod batch;
mod frame;
mod golden;
mod hash;
mod pairing;
mod plan;
mod roundtrip;
mod samples;
mod version;
