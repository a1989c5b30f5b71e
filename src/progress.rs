//! Where a round or race reports what happens, below both and the build
//! steps they share; the CLI implements it.

/// Where a round or race reports what happens; the CLI renders it (live view on a
/// TTY, compact `arbiter <kernel> key=value …` lines otherwise).
pub trait Progress: Sync {
    fn event(&self, kernel: &str, fields: &[(&str, String)]);
    /// A work order entered a phase (`slot`, `build`, `gate`, `critic`, `merge`).
    fn phase(&self, wo: &str, phase: &str);
    /// A work order finished this round.
    fn finished(&self, wo: &str);
    /// This conductor now holds `in_use` of the machine-wide `cap` slots.
    fn slots(&self, _in_use: usize, _cap: u32) {}
}
