//! What the command-line client and the benchmark share as clients of a
//! lightning-store server: the server address given to `--server`, the gRPC
//! endpoint to it with TLS for `https://` URLs (the server's certificate
//! checked against `--ca-cert`, or the public web roots) and a client
//! certificate for mTLS, the bearer token sent on every call, and error
//! text. The token comes from `LIGHTNING_STORE_TOKEN` or `--token-file`,
//! never from a command-line value (visible to every local user). The client
//! side depends on this module and on the generated code in
//! [`lightning_store_proto`], not on server internals.

use std::path::PathBuf;

use http::HeaderValue;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};

/// Returns the URL of the server named by a `--server` value: `host:port`
/// (as grpcurl takes it) means `http://host:port`; an `http://` or
/// `https://` URL is kept.
pub fn server_url(server: &str) -> Result<String, String> {
    let url = if server.contains("://") {
        server.to_owned()
    } else {
        format!("http://{server}")
    };
    let endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| format!("invalid server address `{server}`: {}", error_chain(&e)))?;
    let scheme = endpoint.uri().scheme_str();
    if !matches!(scheme, Some("http" | "https")) || endpoint.uri().port_u16().is_none() {
        return Err(format!(
            "invalid server address `{server}`: expected host:port or an http:// or https:// \
             URL with a port, such as 127.0.0.1:4747"
        ));
    }
    Ok(url)
}

/// Returns an error and its sources joined by `: `, leaving out sources
/// whose text is already part of the message.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let part = inner.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = inner.source();
    }
    text
}

/// The names agent-lightning gives the values of the protocol's enums
/// (`queuing`, `train`): the generated protobuf name (`as_str_name`,
/// `from_str_name`) without the type's prefix, in lowercase.
pub trait ShortName: Copy + TryFrom<i32> + 'static {
    /// The prefix of every value's protobuf name, such as `ROLLOUT_STATUS_`.
    const PREFIX: &'static str;

    /// Returns the protobuf name, such as `ROLLOUT_STATUS_QUEUING`.
    fn proto_name(self) -> &'static str;

    /// Returns the value of a protobuf name.
    fn from_proto_name(name: &str) -> Option<Self>;

    /// Returns the short name, such as `queuing`.
    fn short_name(self) -> String {
        let name = self.proto_name();
        name.strip_prefix(Self::PREFIX)
            .unwrap_or(name)
            .to_ascii_lowercase()
    }

    /// Returns the value of a short name; `unspecified` and names that are
    /// not in lowercase have none.
    fn from_short_name(name: &str) -> Option<Self> {
        if name == "unspecified" || name.bytes().any(|b| b.is_ascii_uppercase()) {
            return None;
        }
        Self::from_proto_name(&format!("{}{}", Self::PREFIX, name.to_ascii_uppercase()))
    }

    /// Returns the short name of a value as it travels: `unspecified` for
    /// zero or a value this client does not know.
    fn name_of(value: i32) -> String {
        Self::try_from(value).map_or_else(|_| "unspecified".to_owned(), Self::short_name)
    }

    /// Returns every value but the unspecified zero, in protobuf order (the
    /// enums number their values without gaps).
    fn specified() -> Vec<Self> {
        (1..)
            .map_while(|value| Self::try_from(value).ok())
            .collect()
    }
}

macro_rules! short_names {
    ($($enum:ty => $prefix:literal),* $(,)?) => {$(
        impl ShortName for $enum {
            const PREFIX: &'static str = $prefix;

            fn proto_name(self) -> &'static str {
                self.as_str_name()
            }

            fn from_proto_name(name: &str) -> Option<Self> {
                Self::from_str_name(name)
            }
        }
    )*};
}

short_names!(
    lightning_store_proto::RolloutStatus => "ROLLOUT_STATUS_",
    lightning_store_proto::AttemptStatus => "ATTEMPT_STATUS_",
    lightning_store_proto::WorkerStatus => "WORKER_STATUS_",
    lightning_store_proto::RolloutMode => "ROLLOUT_MODE_",
    lightning_store_proto::NoTrainingRowsReason => "NO_TRAINING_ROWS_REASON_",
);

/// The environment variable holding the client's token.
pub const TOKEN_ENV: &str = "LIGHTNING_STORE_TOKEN";

/// TLS and token options of a client.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConnectArgs {
    /// File holding the bearer token to send (default: the
    /// `LIGHTNING_STORE_TOKEN` environment variable).
    #[arg(long, global = true, env = "LIGHTNING_STORE_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// CA certificate (PEM) the server's certificate must chain to, for an
    /// `https://` server URL (default: the public web roots).
    #[arg(long, global = true, env = "LIGHTNING_STORE_CA_CERT")]
    pub ca_cert: Option<PathBuf>,
    /// Client certificate (PEM) presented to a server that asks for one (mTLS).
    #[arg(long, global = true, env = "LIGHTNING_STORE_CLIENT_CERT")]
    pub client_cert: Option<PathBuf>,
    /// Private key (PEM) of `--client-cert`.
    #[arg(long, global = true, env = "LIGHTNING_STORE_CLIENT_KEY")]
    pub client_key: Option<PathBuf>,
    /// Name the server's certificate must carry (default: the URL's host).
    #[arg(long, global = true, env = "LIGHTNING_STORE_TLS_SERVER_NAME")]
    pub tls_server_name: Option<String>,
    /// The namespace every call works in (sent as the
    /// `lightning-store-namespace` metadata; default: the token's namespace
    /// when it is limited to one, else `default`).
    #[arg(long, global = true, env = "LIGHTNING_STORE_NAMESPACE")]
    pub namespace: Option<String>,
}

/// A gRPC channel that sends the token and the namespace on every call.
pub type AuthChannel = InterceptedService<Channel, CallMetadata>;

/// The metadata key that names a call's namespace.
pub const NAMESPACE_METADATA: &str = "lightning-store-namespace";

/// Adds `authorization: Bearer <token>` and the namespace to every call
/// (each only when given).
#[derive(Debug, Clone, Default)]
pub struct CallMetadata {
    authorization: Option<MetadataValue<Ascii>>,
    namespace: Option<MetadataValue<Ascii>>,
}

impl tonic::service::Interceptor for CallMetadata {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.authorization {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        if let Some(value) = &self.namespace {
            request
                .metadata_mut()
                .insert(NAMESPACE_METADATA, value.clone());
        }
        Ok(request)
    }
}

impl ConnectArgs {
    /// Returns the endpoint of `url` (`http://`, or `https://` with TLS).
    pub fn endpoint(&self, url: &str) -> Result<Endpoint, String> {
        let endpoint = Endpoint::from_shared(url.to_owned()).map_err(|e| e.to_string())?;
        match endpoint.uri().scheme_str() {
            Some("http") => {
                if self.ca_cert.is_some() || self.client_cert.is_some() {
                    return Err("--ca-cert and --client-cert need an https:// url".to_owned());
                }
                Ok(endpoint)
            }
            Some("https") => endpoint.tls_config(self.tls()?).map_err(|e| e.to_string()),
            _ => {
                Err("expected an http:// or https:// url such as http://127.0.0.1:4747".to_owned())
            }
        }
    }

    fn tls(&self) -> Result<ClientTlsConfig, String> {
        let read = |path: &PathBuf| {
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
        };
        let mut tls = ClientTlsConfig::new();
        tls = match &self.ca_cert {
            Some(path) => tls.ca_certificate(Certificate::from_pem(read(path)?)),
            None => tls.with_webpki_roots(),
        };
        match (&self.client_cert, &self.client_key) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            (None, None) => {}
            _ => return Err("--client-cert and --client-key go together".to_owned()),
        }
        if let Some(name) = &self.tls_server_name {
            tls = tls.domain_name(name.clone());
        }
        Ok(tls)
    }

    /// Returns the token to send, if any.
    pub fn token(&self) -> Result<Option<String>, String> {
        let token = match &self.token_file {
            Some(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?,
            None => std::env::var(TOKEN_ENV).unwrap_or_default(),
        };
        let token = token.trim();
        Ok((!token.is_empty()).then(|| token.to_owned()))
    }

    /// Returns the `authorization` header value of the token, if any.
    pub fn authorization(&self) -> Result<Option<HeaderValue>, String> {
        self.token()?
            .map(|token| {
                let mut value = HeaderValue::try_from(format!("Bearer {token}"))
                    .map_err(|_| "the token is not a valid header value".to_owned())?;
                value.set_sensitive(true);
                Ok(value)
            })
            .transpose()
    }

    /// Returns the interceptor that sends the token and the namespace.
    pub fn call_metadata(&self) -> Result<CallMetadata, String> {
        let authorization = self
            .token()?
            .map(|token| {
                let mut value: MetadataValue<Ascii> = format!("Bearer {token}")
                    .parse()
                    .map_err(|_| "the token is not a valid header value".to_owned())?;
                value.set_sensitive(true);
                Ok::<_, String>(value)
            })
            .transpose()?;
        let namespace = self
            .namespace
            .as_deref()
            .map(|name| {
                name.parse()
                    .map_err(|_| format!("--namespace {name:?} is not a valid header value"))
            })
            .transpose()?;
        Ok(CallMetadata {
            authorization,
            namespace,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_addresses_take_host_port_or_an_http_url() {
        assert_eq!(
            server_url("127.0.0.1:4747").unwrap(),
            "http://127.0.0.1:4747"
        );
        assert_eq!(server_url("localhost:80").unwrap(), "http://localhost:80");
        assert_eq!(server_url("[::1]:4747").unwrap(), "http://[::1]:4747");
        assert_eq!(
            server_url("http://store.example:4747").unwrap(),
            "http://store.example:4747"
        );
        assert_eq!(server_url("https://h:443").unwrap(), "https://h:443");
        for bad in ["ftp://h:1", "127.0.0.1", "http://h", "h:notaport", ""] {
            assert!(server_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn enum_values_have_agent_lightning_short_names() {
        use lightning_store_proto::{AttemptStatus, RolloutMode, RolloutStatus, WorkerStatus};
        assert_eq!(RolloutStatus::Requeuing.short_name(), "requeuing");
        assert_eq!(RolloutStatus::specified().len(), 7);
        for status in RolloutStatus::specified() {
            assert_eq!(
                RolloutStatus::from_short_name(&status.short_name()),
                Some(status)
            );
        }
        assert_eq!(AttemptStatus::name_of(5), "unresponsive");
        assert_eq!(WorkerStatus::name_of(99), "unspecified");
        assert_eq!(RolloutMode::name_of(0), "unspecified");
        assert_eq!(RolloutMode::from_short_name("val"), Some(RolloutMode::Val));
        for bad in ["unspecified", "VAL", "ROLLOUT_MODE_VAL", ""] {
            assert_eq!(RolloutMode::from_short_name(bad), None, "{bad}");
        }
    }
}
