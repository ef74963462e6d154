//! A connected client: the store's gRPC client over an authenticated channel.

use crate::connection::AuthChannel;
use lightning_store_proto::lightning_store_service_client::LightningStoreServiceClient;

pub(crate) type Grpc = LightningStoreServiceClient<AuthChannel>;

/// A connection to the server plus the output format.
pub(crate) struct Session {
    pub(crate) client: Grpc,
    pub(crate) json: bool,
}
