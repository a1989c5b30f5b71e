mod cli;

// A conductor runs a thread per build and gix's parallel checkouts: glibc's
// allocator keeps an arena per thread and returns little of it, so a run of
// 2,000 orders held ~350 MB resident for ~30 MB live. mimalloc returns
// freed pages to the system.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(cli::run());
}
