//! The chunked parallel reader shared by the work-order loader and the state
//! snapshot: thousands of small independent reads (files, note blobs) split
//! into one contiguous chunk per thread, read at once, handed back in order.

/// At most this many threads share one read: past four, the reads wait on
/// the disk and the allocator rather than on the CPU.
const MAX_READERS: usize = 4;

/// The machine's cores, asked once: `available_parallelism` reads the
/// cgroup files on every call, and every state transaction reads in chunks.
pub(crate) fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// `read` applied to contiguous chunks of `items`, the parts in the order
/// of `items`: on up to [`MAX_READERS`] threads (as many as the machine
/// has), each given at least `min_per_reader` items, since a thread for fewer
/// costs more than it saves; on this thread alone when that makes one.
pub fn read_in_chunks<T, R>(
    items: &[T],
    min_per_reader: usize,
    read: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<Vec<R>>
where
    T: Sync,
    R: Send,
{
    let workers = cores()
        .min(MAX_READERS)
        .min(items.len().div_ceil(min_per_reader.max(1)))
        .max(1);
    if workers == 1 {
        return vec![read(items)];
    }
    let chunk = items.len().div_ceil(workers);
    let read = &read;
    std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| scope.spawn(move || read(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::read_in_chunks;

    #[test]
    fn parts_come_back_in_order_and_whole() {
        let items: Vec<u32> = (0..10_000).collect();
        for min in [1, 256, 20_000] {
            let parts = read_in_chunks(&items, min, |chunk| chunk.iter().map(|i| i * 2).collect());
            assert!(!parts.is_empty());
            let flat: Vec<u32> = parts.into_iter().flatten().collect();
            assert_eq!(flat, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        }
        assert_eq!(
            read_in_chunks(&[] as &[u32], 256, |c| c.to_vec()),
            [Vec::<u32>::new()]
        );
    }
}
