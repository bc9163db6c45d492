//! Config errors, each naming the file, the line and the key, and the one
//! rule for "which line is this byte on".

use std::path::PathBuf;

/// A configuration error, with where it was found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not TOML.
    #[error("{file}:{line}: {message}")]
    Syntax {
        /// File name.
        file: String,
        /// 1-based line.
        line: usize,
        /// The parser's message.
        message: String,
    },
    /// A key is unknown, has the wrong type, or its value is not acceptable.
    #[error("{}", invalid(file, *line, key, message))]
    Invalid {
        /// File name (or `<flags>`).
        file: String,
        /// 1-based line (0 for flags).
        line: usize,
        /// The offending key (or `--flag`).
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// The file name in errors about command-line flags.
pub const FLAGS: &str = "<flags>";

/// An invalid value where it was found: `file:line: key ...` for a file,
/// `command line: flag ...` for a flag (a flag has no line to point at).
fn invalid(file: &str, line: usize, key: &str, message: &str) -> String {
    match file == FLAGS {
        true => format!("command line: flag `{key}`: {message}"),
        false => format!("{file}:{line}: key `{key}`: {message}"),
    }
}

/// 1-based line number of byte `offset` in `text`, always a line the text
/// has (1 for an empty text).
///
/// A parser reports "unexpected end of input" at `text.len()`; when the
/// text ends with a newline that offset is past the last line, and counting
/// newlines would name a line the file does not have (`_="""\n` is one
/// line, not two). Counting bytes, not chars, also keeps an offset inside a
/// multi-byte character from panicking.
pub fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    let line = text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    line.min(text.lines().count().max(1))
}

#[cfg(test)]
mod tests {
    use super::line_of;

    #[test]
    fn lines_of_offsets() {
        assert_eq!(line_of("", 0), 1);
        assert_eq!(line_of("a\nb\n", 0), 1);
        assert_eq!(line_of("a\nb\n", 2), 2);
        assert_eq!(line_of("a\nb", 99), 2);
        // Inside a multi-byte character.
        assert_eq!(line_of("é\nx", 1), 1);
    }

    #[test]
    fn end_of_input_after_a_final_newline_is_the_last_line() {
        // A proptest finding: an unterminated multi-line
        // string whose error the parser places at the very end.
        let text = "_=\"\"\"\n";
        assert_eq!(line_of(text, text.len()), 1);
        assert_eq!(line_of("a\n\n", 3), 2);
    }
}
