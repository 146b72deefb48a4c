//! A port on 127.0.0.1 held closed, or handed to a server, never released.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;

/// A port on 127.0.0.1 that this process holds, for a test that needs a
/// port where nothing listens: a TCP socket bound to it (without
/// `SO_REUSEADDR`, so no other socket can bind the port) that never
/// listens.
///
/// Bound and not listening, because a connection to it is then refused at
/// once, as to a port where nothing runs; a listener that never accepts
/// would take the connection into its backlog instead, and leave the
/// request hanging until some timeout. Held, because a port read from a
/// listener that is then dropped can be taken by any other process before
/// the test uses it. Keep the value alive for as long as the port must stay
/// closed; [`ReservedPort::socket`] hands the socket to a server that then
/// listens on it.
#[derive(Debug)]
pub struct ReservedPort {
    socket: OwnedFd,
    port: u16,
}

impl ReservedPort {
    /// Binds a socket to a port of the kernel's choosing on 127.0.0.1.
    pub fn new() -> ReservedPort {
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
            .expect("cannot create a TCP socket");
        let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
        socket
            .bind(&any.into())
            .expect("cannot bind a socket to 127.0.0.1");
        let port = socket
            .local_addr()
            .unwrap()
            .as_socket()
            .expect("an IPv4 address")
            .port();
        ReservedPort {
            socket: socket.into(),
            port,
        }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// A duplicate of the bound socket (close-on-exec), to hand to a server
    /// that listens on it, for example as its stdin
    /// (`Stdio::from(port.socket())`). Once it listens, connections to the
    /// port wait for a server instead of being refused, for as long as this
    /// value or the server holds the socket.
    pub fn socket(&self) -> OwnedFd {
        self.socket
            .try_clone()
            .expect("cannot duplicate the reserved socket")
    }
}

impl Default for ReservedPort {
    fn default() -> Self {
        ReservedPort::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn a_reserved_port_refuses_and_no_one_else_can_take_it() {
        let port = ReservedPort::new();
        let refused = TcpStream::connect(("127.0.0.1", port.port())).unwrap_err();
        assert_eq!(refused.kind(), ErrorKind::ConnectionRefused);
        let taken = TcpListener::bind(("127.0.0.1", port.port())).unwrap_err();
        assert_eq!(taken.kind(), ErrorKind::AddrInUse);
        assert_eq!(
            port.url("/mcp"),
            format!("http://127.0.0.1:{}/mcp", port.port())
        );
    }
}
