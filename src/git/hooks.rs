//! Which git hooks a repository has, found as git finds them: gix 0.90
//! runs no hooks, so git-arbiter asks git to run them (or lets git's own
//! commands do it) and skips that process when there is no hook to run.

use std::os::unix::fs::PermissionsExt;

/// Would git run the hook `name` in `repo`'s worktree? An executable file
/// `<name>` in `core.hooksPath` (relative to the worktree's top, `~`
/// expanded) or else in `<common-dir>/hooks`. Hooks configured in a `hook`
/// section of the configuration (newer gits) count as present, unread.
pub fn present(repo: &gix::Repository, name: &str) -> bool {
    let config = repo.config_snapshot();
    if config
        .plumbing()
        .sections_by_name("hook")
        .is_some_and(|mut sections| sections.next().is_some())
    {
        return true;
    }
    let dir = match config.trusted_path("core.hooksPath") {
        Ok(Some(path)) => match repo.workdir() {
            Some(top) if path.is_relative() => top.join(path),
            _ => path,
        },
        Ok(None) => repo.common_dir().join("hooks"),
        // A hooks path that cannot be read as one: the command that would
        // run the hook decides what that means.
        Err(_) => return true,
    };
    std::fs::metadata(dir.join(name))
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::present;
    use std::os::unix::fs::PermissionsExt;

    fn repo(dir: &std::path::Path) -> gix::Repository {
        let status = std::process::Command::new("git")
            .args(["init", "-q"])
            .arg(dir)
            .status()
            .expect("git init");
        assert!(status.success());
        gix::open_opts(dir, gix::open::Options::isolated()).expect("open")
    }

    fn write_hook(path: &std::path::Path, mode: u32) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }

    #[test]
    fn a_hook_is_an_executable_file_in_the_hooks_folder() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("r");
        let r = repo(&dir);
        // `git init` writes only `.sample` hooks.
        assert!(!present(&r, "post-merge"));
        write_hook(&dir.join(".git/hooks/post-merge"), 0o644);
        assert!(!present(&r, "post-merge"), "git skips a hook it cannot run");
        write_hook(&dir.join(".git/hooks/post-merge"), 0o755);
        assert!(present(&r, "post-merge"));
        assert!(!present(&r, "post-commit"));
    }

    #[test]
    fn core_hooks_path_is_relative_to_the_worktree() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("r");
        repo(&dir);
        write_hook(&dir.join(".git/hooks/post-commit"), 0o755);
        write_hook(&dir.join("my-hooks/prepare-commit-msg"), 0o755);
        let r = gix::open_opts(
            &dir,
            gix::open::Options::isolated().config_overrides(["core.hooksPath=my-hooks"]),
        )
        .expect("open");
        assert!(present(&r, "prepare-commit-msg"));
        assert!(
            !present(&r, "post-commit"),
            "the default folder is not read"
        );
    }

    /// A hooks path that cannot be resolved is not read as "no hooks": the
    /// caller leaves the hook to git, which decides.
    #[test]
    fn an_unresolvable_hooks_path_counts_as_a_hook() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = tmp.path().join("r");
        repo(&dir);
        let r = gix::open_opts(
            &dir,
            gix::open::Options::isolated()
                .config_overrides(["core.hooksPath=~no-such-user-here/hooks"]),
        )
        .expect("open");
        assert!(present(&r, "post-merge"));
    }
}
