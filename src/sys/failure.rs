//! Reading why something failed: the chain of causes, into gix's error
//! trees too, and the failures every layer treats alike (a full disk, git's
//! maintenance racing an object write).

/// Does an error text (ours, or a git command's) say the disk is full?
pub fn says_disk_full(text: &str) -> bool {
    text.contains("No space left on device") || text.contains("Disk quota exceeded")
}

/// Every error of `e`'s chain, `e` first, descending into gix's error trees
/// (a `gix::Error` keeps its causes as a tree, not only as `source()`).
pub fn causes<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> + 'a {
    let mut pending = vec![e];
    std::iter::from_fn(move || {
        let e = pending.pop()?;
        if let Some(source) = e.source() {
            pending.push(source);
        }
        if let Some(tree) = e.downcast_ref::<gix::Error>() {
            // Its first entry is itself; the rest are its causes.
            let inner: Vec<_> = tree.iter_errors().skip(1).collect();
            pending.extend(inner.into_iter().rev());
        }
        Some(e)
    })
}

/// Did `e` fail for want of disk space (ENOSPC or EDQUOT anywhere)?
pub fn is_disk_full(e: &(dyn std::error::Error + 'static)) -> bool {
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    causes(e).any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
            io.kind() == std::io::ErrorKind::StorageFull
                || io.kind() == std::io::ErrorKind::QuotaExceeded
                || matches!(io.raw_os_error(), Some(ENOSPC | EDQUOT))
        }) || says_disk_full(&c.to_string())
    })
}

/// Did `e` fail the way git's own maintenance (`git gc`, `git repack`,
/// `git prune`) beside us makes an object write or read fail for a moment:
/// an empty fan-out folder removed between its creation and the rename of
/// a new loose object into it (git retries that case too), or a loose
/// object read just as it moved into a pack, or an object looked up in the
/// packs as `git repack -a -d` replaced them (gix sees neither the old pack
/// nor yet the new one)? The caller retries only objects that a ref or a
/// tree it read names: a miss that lasts is reported after the retries.
pub fn is_transient_object_error(e: &(dyn std::error::Error + 'static)) -> bool {
    if causes(e).any(|c| c.to_string().contains("could not be found")) {
        return true;
    }
    let missing = causes(e).any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound)
    });
    missing
        && causes(e).any(|c| {
            let text = c.to_string();
            text.contains("loose object") || text.contains("object directory")
        })
}
