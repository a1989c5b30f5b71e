use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::Args;
use git_arbiter::run::timeline::{load, render, Timeline};
use git_arbiter::sys::error::InputError;
use git_arbiter::{run::review, Error, ExitCode};

use super::{out, Env};

/// Draw where the time of a run went, from `refs/notes/arbiter` alone.
///
/// Writes one self-contained file (SVG and CSS inline, no script, nothing
/// fetched): one lane per slot over time, a bar per attempt split into
/// setup, build and gates, the merge queue's waits and verifications below,
/// landings, halts and retries marked; each bar is labelled with its order
/// and says on hover how it ended, how long it took and what it cost. The
/// header gives the makespan (first dispatch to last event), the slot
/// utilisation (slot time held over lanes × makespan), the orders landed
/// and halted, and the cost the builders reported. Any clone with the notes
/// can draw any past run.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Write the timeline as an HTML page
    #[arg(long, value_name = "FILE")]
    html: Option<PathBuf>,
    /// Write the timeline as an SVG picture
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Only the attempts of run ID: the conductor named on their dispatch (`claim … conductor=ID`)
    #[arg(long, value_name = "ID", conflicts_with = "since")]
    run: Option<String>,
    /// Only the attempts with an event recorded after REV, a commit of `refs/notes/arbiter` (e.g. `refs/notes/arbiter@{1}`)
    #[arg(long, value_name = "REV")]
    since: Option<String>,
    #[command(flatten)]
    pub orders: super::OrdersArgs,
}

/// How a timeline becomes the text of one kind of file.
type Render = fn(&Timeline) -> String;

pub fn cmd_report(env: &Env, args: ReportArgs) -> Result<ExitCode, Error> {
    let targets: Vec<(&Path, Render)> = [
        (args.html.as_deref(), render::html as Render),
        (args.svg.as_deref(), render::svg),
    ]
    .into_iter()
    .filter_map(|(path, render)| path.map(|p| (p, render)))
    .collect();
    if targets.is_empty() {
        return Err(InputError::new(
            "report: say where to write it, with --html FILE or --svg FILE",
        )
        .hint("e.g. 'git arbiter report --html run.html'")
        .into());
    }
    let ctx = env.context()?;
    let orders = review::orders_if_any(&ctx, env.orders_flag());
    let select = match (args.run, args.since) {
        (Some(run), _) => load::Select::Run(run),
        (None, Some(rev)) => load::Select::Since(rev),
        (None, None) => load::Select::All,
    };
    let timeline = load::load(&ctx, orders.as_ref(), &select)?;
    // Every file is made beside its destination before any is put in
    // place: a destination that cannot be written leaves nothing written.
    let mut staged = Vec::with_capacity(targets.len());
    for (path, render) in &targets {
        staged.push((stage(path, &render(&timeline))?, *path));
    }
    let mut said = String::new();
    for (file, path) in staged {
        file.persist(path)
            .map_err(|e| Error::io(format!("writing {}", path.display()))(e.error))?;
        said.push_str(&format!("wrote {}\n", path.display()));
    }
    said.push_str(&render::stats(&timeline));
    said.push('\n');
    out(&said);
    Ok(ExitCode::Success)
}

/// `text` in a temporary file beside `path`, to be put in its place.
fn stage(path: &Path, text: &str) -> Result<tempfile::NamedTempFile, Error> {
    let cannot = |why: String| {
        Error::from(
            InputError::new(format!("cannot write {}: {why}", path.display()))
                .hint("name a file in a directory that exists and that you may write to"),
        )
    };
    if path.is_dir() {
        return Err(cannot("it is a directory".into()));
    }
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    // Readable as any file the user writes (the umask applies), not the
    // private mode of a temporary file.
    let mut file = tempfile::Builder::new()
        .prefix(".arbiter-report")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(dir)
        .map_err(|e| cannot(e.to_string()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.flush())
        .map_err(|e| Error::io(format!("writing {}", path.display()))(e))?;
    Ok(file)
}
