//! cairn-protocol's integration tests (one binary): golden vectors, property
//! round trips, robustness of the decoders, version negotiation, pairing,
//! planning, batches, the record hash, and the sync conversation state
//! machine (scripted, property-tested and simulated end to end).

mod batch;
mod conversation;
mod conversation_sim;
mod frame;
mod golden;
mod hash;
mod pairing;
mod plan;
mod roundtrip;
mod samples;
mod version;
