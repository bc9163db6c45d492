//! The folder where `doctor` keeps what each OS tool printed, so a report
//! can be read again (and replayed by the agent's readers) without the host.

use std::path::PathBuf;
use std::{fs, io};

/// The capture folder.
pub(crate) struct Captures {
    pub(super) root: PathBuf,
}

impl Captures {
    /// Writes `bytes` to `rel` under the folder.
    pub(crate) fn save(&self, rel: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self.root.join(rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        fs::write(path, bytes)
    }

    /// Copies `<sys>/<rel>` (a sysfs file) to `<folder>/sys/<rel>`, when
    /// readable: the captures then mirror sysfs for the agent's readers.
    #[cfg(target_os = "linux")]
    pub(crate) fn copy_sys(&self, sys: &std::path::Path, rel: &str) {
        if let Ok(bytes) = fs::read(sys.join(rel)) {
            let _ = self.save(&format!("sys/{rel}"), &bytes);
        }
    }
}
