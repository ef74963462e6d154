//! What the command-line client and the benchmark share as clients of a
//! lightning-store server: the server address given to `--server`, the gRPC
//! endpoint to it, and error text. The client side depends on this module and
//! on the generated code in [`crate::proto`], not on server internals.

use tonic::transport::Endpoint;

/// Returns the URL of the server named by a `--server` value: `host:port`
/// (as grpcurl takes it) means `http://host:port`; an `http://` URL is kept.
pub fn server_url(server: &str) -> Result<String, String> {
    let url = if server.contains("://") {
        server.to_owned()
    } else {
        format!("http://{server}")
    };
    let endpoint = Endpoint::from_shared(url.clone())
        .map_err(|e| format!("invalid server address `{server}`: {}", error_chain(&e)))?;
    if endpoint.uri().scheme_str() != Some("http") || endpoint.uri().port_u16().is_none() {
        return Err(format!(
            "invalid server address `{server}`: expected host:port or an http:// URL with a \
             port, such as 127.0.0.1:4747"
        ));
    }
    Ok(url)
}

/// Returns the gRPC endpoint of the server named by a `--server` value.
pub fn endpoint(server: &str) -> Result<Endpoint, String> {
    let url = server_url(server)?;
    Endpoint::from_shared(url).map_err(|e| error_chain(&e))
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
        for bad in ["ftp://h:1", "127.0.0.1", "http://h", "h:notaport", ""] {
            assert!(server_url(bad).is_err(), "{bad}");
        }
    }
}
