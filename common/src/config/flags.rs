//! Command-line flags generated from a key table, for `clap`.

use std::marker::PhantomData;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use super::{off_value, Schema, Value};

/// The flags given on the command line for `C`'s keys. Flatten it into a
/// `clap` derive struct (`#[command(flatten)] flags: Flags<Config>`).
pub struct Flags<C> {
    /// Key index, value, and the flag that gave it (without dashes).
    pub given: Vec<(usize, Value, &'static str)>,
    _c: PhantomData<fn() -> C>,
}

impl<C> Default for Flags<C> {
    fn default() -> Self {
        Flags {
            given: Vec::new(),
            _c: PhantomData,
        }
    }
}

impl<C> Clone for Flags<C> {
    fn clone(&self) -> Self {
        Flags {
            given: self.given.clone(),
            _c: PhantomData,
        }
    }
}

impl<C> std::fmt::Debug for Flags<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.given).finish()
    }
}

impl<C: Schema> Flags<C> {
    /// Flags as if given on the command line: `(flag without dashes,
    /// argument)`, an off flag with an empty argument. For tests and
    /// embedders; panics on a flag the table does not have.
    pub fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        let mut given: Vec<(usize, Value, &'static str)> = Vec::new();
        for (flag, arg) in pairs {
            let (i, d) = C::keys()
                .iter()
                .enumerate()
                .find(|(_, d)| d.flag == Some(*flag) || d.off.is_some_and(|o| o.flag == *flag))
                .unwrap_or_else(|| panic!("no flag --{flag}"));
            match d.off.filter(|o| o.flag == *flag) {
                Some(o) => given.push((i, off_value(&o), o.flag)),
                None if d.repeated => match given.iter_mut().find(|(j, _, _)| *j == i) {
                    Some((_, Value::List(l), _)) => l.push(arg.to_string()),
                    _ => given.push((i, Value::List(vec![arg.to_string()]), d.flag.unwrap_or(""))),
                },
                None => given.push((i, Value::Str(arg.to_string()), d.flag.unwrap_or(""))),
            }
        }
        Flags {
            given,
            _c: PhantomData,
        }
    }
}

fn help_with_default(help: &str, default: &str) -> String {
    match default {
        "" => help.to_string(),
        d => format!("{help} [default: {d}]"),
    }
}

impl<C: Schema> Args for Flags<C> {
    fn augment_args(mut cmd: Command) -> Command {
        for d in C::keys() {
            if let Some(flag) = d.flag {
                let mut arg = Arg::new(d.key)
                    .long(flag)
                    .value_name(d.value_name)
                    .value_parser(clap::value_parser!(String))
                    .help(help_with_default(d.help, d.documented_default()));
                if d.repeated {
                    arg = arg.action(ArgAction::Append);
                }
                cmd = cmd.arg(arg);
            }
            if let Some(off) = d.off {
                let mut arg = Arg::new(off.flag)
                    .long(off.flag)
                    .action(ArgAction::SetTrue)
                    .help(off.help);
                if d.flag.is_some() {
                    arg = arg.conflicts_with(d.key);
                }
                cmd = cmd.arg(arg);
            }
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<C: Schema> FromArgMatches for Flags<C> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Flags::default();
        flags.update_from_arg_matches(m)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        for (i, d) in C::keys().iter().enumerate() {
            if let Some(flag) = d.flag {
                if d.repeated {
                    if let Some(vs) = m.get_many::<String>(d.key) {
                        self.given
                            .push((i, Value::List(vs.cloned().collect()), flag));
                    }
                } else if let Some(v) = m.get_one::<String>(d.key) {
                    self.given.push((i, Value::Str(v.clone()), flag));
                }
            }
            if let Some(off) = d.off {
                if m.get_flag(off.flag) {
                    self.given.push((i, off_value(&off), off.flag));
                }
            }
        }
        Ok(())
    }
}
