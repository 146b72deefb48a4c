//! Golden digests of realistic payloads (refresh with `UPDATE_EXPECT=1` and
//! read the diff), the text digests, and the bounds of the envelope's inputs;
//! the properties over arbitrary JSON are unit tests (`src/props.rs`).

#![allow(clippy::unwrap_used, missing_docs)]

mod fit;
mod golden;
mod passthrough;
mod text;
