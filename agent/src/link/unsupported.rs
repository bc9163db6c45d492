//! Link watching on an OS without an implementation: opening the watcher
//! fails with [`Unsupported`], so the agent logs it instead of watching
//! nothing in silence.

use std::collections::HashMap;
use std::io;
use std::path::Path;

use super::bridge_loop::Flood;
use super::ports::Tables;
use super::reconcile::{Inventory, LinkOs, OsEvent};
use super::state::LinkState;
use crate::platform::{Source, Support, Unsupported};

/// No link watcher here.
pub(super) const SUPPORT: Support = Support::Unsupported;

/// Never built: [`open`] always fails.
pub(super) enum Never {}

/// Always [`Unsupported`].
pub(super) fn open(_sysfs_root: &Path) -> io::Result<Never> {
    Err(Unsupported::new(Source::Link).into())
}

impl LinkOs for Never {
    fn events(&mut self, _nonblocking: bool) -> io::Result<Vec<OsEvent>> {
        match *self {}
    }
    fn inventory(&mut self) -> Inventory {
        match *self {}
    }
    fn read(&mut self, _name: &str) -> io::Result<LinkState> {
        match *self {}
    }
    fn announce(&mut self, _name: &str) -> io::Result<()> {
        match *self {}
    }
    fn tables(&mut self, _bridges: &HashMap<String, String>) -> io::Result<Tables> {
        match *self {}
    }
    fn flood(&mut self, _bridge: &str, _members: &[String]) -> io::Result<Flood> {
        match *self {}
    }
}
