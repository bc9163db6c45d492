//! The STAMP reflector role: answers peers' probes on the bound socket.

use std::net::UdpSocket;

use super::crew::Crew;
use crate::error::Error;
use crate::stamp;

pub(super) fn start(crew: &mut Crew, socket: UdpSocket) -> Result<(), Error> {
    let spawned = stamp::spawn_reflector(
        socket,
        crew.health.clone(),
        crew.stop.clone(),
        Default::default(),
    );
    crew.thread("STAMP reflector", spawned)
}
