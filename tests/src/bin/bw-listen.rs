//! A TCP listener for service-check tests: binds the address given as the
//! only argument, prints `{"ready":true}` once listening, then accepts and
//! closes connections until it is killed. Tests start it inside a bed node
//! with `ip netns exec` and kill it to take the "service" down.

use std::io::Write;
use std::net::TcpListener;

use anyhow::Context;

fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .context("usage: bw-listen ADDR:PORT")?;
    let listener = TcpListener::bind(&addr).with_context(|| format!("binding {addr}"))?;
    println!("{{\"ready\":true}}");
    std::io::stdout().flush()?;
    for conn in listener.incoming() {
        // Accepting is the whole service; the peer only measures connect.
        drop(conn);
    }
    Ok(())
}
