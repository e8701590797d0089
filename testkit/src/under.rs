//! A command run under another program that then runs it itself (`ip netns exec NAME`,
//! `taskset -c CPUS`), so the child's process id stays the program's: the same arguments,
//! working directory and environment changes.

use std::process::Command;

/// `cmd` run as `program args... cmd...`.
pub fn under(program: &str, args: &[&str], cmd: &Command) -> Command {
    let mut wrapped = Command::new(program);
    wrapped
        .args(args)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_follows_the_program_with_its_directory_and_environment() {
        let mut cmd = Command::new("java");
        cmd.args(["-cp", "x.jar"])
            .current_dir("/tmp")
            .env("A", "1")
            .env_remove("B");
        let w = under("taskset", &["-c", "0"], &cmd);
        assert_eq!(w.get_program(), "taskset");
        let args: Vec<_> = w.get_args().collect();
        assert_eq!(args, ["-c", "0", "java", "-cp", "x.jar"]);
        assert_eq!(w.get_current_dir(), Some(std::path::Path::new("/tmp")));
        let envs: Vec<_> = w.get_envs().collect();
        assert_eq!(envs.len(), 2);
    }
}
