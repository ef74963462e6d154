//! The command line's client side: the commands that look inside (and drive)
//! a running store ([`client`]) and the benchmark tool ([`bench`]), over one
//! way of reaching a server ([`connection`]). They speak only the public
//! contract (`lightning-store-proto`): this crate depends on no server layer,
//! which `cargo metadata` shows and tests/integration/architecture.rs checks.

pub mod bench;
pub mod client;
pub mod connection;
pub mod duration;
pub mod exit;
