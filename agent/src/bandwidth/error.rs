//! Why a bandwidth test fails: [`BandwidthError`], shared by the client,
//! the server and the control protocol, which take it from here.

/// Why a bandwidth test failed.
#[derive(Debug, thiserror::Error)]
pub enum BandwidthError {
    /// The options cannot describe a test.
    #[error("invalid options: {0}")]
    Options(String),
    /// The server address did not resolve.
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// Connecting the control channel failed.
    #[error("connecting to {addr}")]
    Connect {
        /// Address tried.
        addr: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The server is running another test (`ACCESS_DENIED`); retry later.
    #[error("server busy: another test is running")]
    Busy,
    /// The server reported an error (`SERVER_ERROR`).
    #[error("server error: i_errno {i_errno}, errno {errno}")]
    Server {
        /// iperf3's error code.
        i_errno: i32,
        /// The OS errno on the server.
        errno: i32,
    },
    /// The server ended the test (`SERVER_TERMINATE`).
    #[error("server terminated the test")]
    ServerTerminated,
    /// The peer closed the control connection mid-protocol.
    #[error("peer closed the control connection")]
    PeerClosed,
    /// The peer broke the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The caller asked the test to stop (agent shutdown).
    #[error("stopped by the agent")]
    Stopped,
    /// Socket I/O on the control or a data connection.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl BandwidthError {
    /// True when the right reaction is a (jittered) retry, not an alarm.
    pub fn is_busy(&self) -> bool {
        matches!(self, BandwidthError::Busy)
    }
}
