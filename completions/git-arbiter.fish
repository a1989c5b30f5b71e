# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_git_arbiter_global_optspecs
    string join \n h/help V/version
end

function __fish_git_arbiter_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_git_arbiter_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_git_arbiter_using_subcommand
    set -l cmd (__fish_git_arbiter_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -s h -l help -d 'Print help'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -s V -l version -d 'Print version'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "round" -d 'Run work orders: built concurrently in their own worktrees, landed through a verified merge queue'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "race" -d 'Best-of-N: build N instances of one work order, merge the best one back'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "pick" -d 'Choose the best of N candidates read from stdin (the selection kernel)'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "demo" -d 'Run a full round on a built-in example, in a temporary repository'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "status" -d 'Show every work order\'s state: the reconcile table'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "worktree" -d 'Create, remove and list git-arbiter\'s linked worktrees'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "merge-back" -d 'Merge a work order\'s branch `arbiter/<id>` into the integration branch'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "batch" -d 'Select the next batch: eligible work orders whose declared files are pairwise disjoint'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "lint" -d 'Check the work orders: every error at once, and what is probably not meant'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "clear" -d 'Lift the HALT of work orders: the only way a halted order runs again'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "retry" -d 'Land kept work again after fixing its order: a halted merge, or work waiting to land'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "halt" -d 'Halt a work order by hand: it is never selected, built or merged until `git arbiter clear`'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "slot" -d 'Machine-wide build slots: who holds them, or hold one around a command'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "stop" -d 'Ask the running conductors (`round`, `race`) of this repository to stop'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "sync" -d 'Bring this clone\'s state (`refs/notes/arbiter`) and a git remote\'s together'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "log" -d 'Show the disposition history of every work order, oldest first, from `refs/notes/arbiter`'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "show" -d 'Show the evidence for reviewing one work order'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "report" -d 'Draw where the time of a run went, from `refs/notes/arbiter` alone'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "doctor" -d 'Find, and with --fix repair, what crashes and killed processes leave behind'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "pool" -d 'Show and prune the pool of warm worktrees'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "install-docs" -d 'Install the man pages and shell completions where `man` and the shells find them'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l build -d 'Builder command, run via `sh -c` in each work order\'s worktree [default: `arbiter.build`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l gate -d 'Gate command (repeatable): exit ≠ 0 discards the attempt for a retry [default: `arbiter.gate`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l critic -d 'Critic command (repeatable): exit ≠ 0 halts the work order (`blocking_critique`) [default: `arbiter.critic`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l final-gate -d 'Run once on the integration tip when every work order is done; failure escalates [default: `arbiter.finalGate`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l budget-cmd -d 'Checked once per round; exit ≠ 0 stops with an escalation [default: `arbiter.budgetCmd`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l max-cost -d 'Dispatch nothing new once the cost the run\'s builders reported (`$ARBITER_REPORT`) reaches USD; running builds finish, the run stops with `cost_budget` [default: `arbiter.maxCost`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l into -d 'The integration branch [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l max -d 'At most N work orders in flight for this conductor (per round with `--schedule rounds`) [default: `arbiter.maxBatch`, else 8]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l max-total -d 'Machine-wide cap on concurrent builds [default: `arbiter.maxTotal`, else 6]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l schedule -d '`continuous` (a freed slot takes the next order, passed orders land at once) or `rounds` (lockstep) [default: `arbiter.schedule`, else continuous]' -r -f -a "continuous\t''
rounds\t''"
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l verify -d '`merged` (gates run on the merged result before the branch moves) or `none` [default: `arbiter.verify`, else merged when a gate is configured]' -r -f -a "merged\t''
none\t''"
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l remote -d 'Coordinate with other machines through this git remote: its notes ref and integration branch are the state, every transition a compare-and-swap push [default: `arbiter.remote`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l timeout -d 'Per-build time limit, e.g. `90s`, `10m`, `1h30m` [default: `arbiter.timeout`, else none]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l drift-scope -d 'Drift scope: `own` (the work order\'s declared files) or `batch` (the union of the round\'s batch)' -r -f -a "own\t''
batch\t''"
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l setup -d 'Run in a worktree before its first build, and again when a path matching `arbiter.setupInputs` changed; exit ≠ 0 fails the attempt (retryable, step `setup`) [default: `arbiter.setup`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l once -d 'Dispatch only what is eligible at the start (one round with `--schedule rounds`)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l dry-run -d 'Print the planned batches; build nothing, change nothing'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l json -d 'Print the final summary as versioned JSON on stdout'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -l no-pool -d 'Fresh worktrees: one created and removed per attempt instead of reused pooled ones [default: `arbiter.pool`, on]'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand round" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -s n -d 'Number of instances' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l build -d 'Builder command, run via `sh -c` in each instance\'s worktree [default: `arbiter.build`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l gate -d 'Gate command (repeatable): exit ≠ 0 rules the instance out [default: `arbiter.gate`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l score -d 'Score command: its last non-empty stdout line is the instance\'s integer score' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l min-score -d 'Nothing below this score wins [default: `arbiter.minScore`, else no floor]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l into -d 'The integration branch [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l max-total -d 'Machine-wide cap on concurrent builds [default: `arbiter.maxTotal`, else 6]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l timeout -d 'Per-command time limit, e.g. `90s`, `10m`, `1h30m` [default: `arbiter.timeout`, else none]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l verify -d '`merged` (gates run on the winner merged onto the tip before the branch moves; failing, the next-best is tried) or `none` [default: `arbiter.verify`, else merged when a gate is configured]' -r -f -a "merged\t''
none\t''"
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l setup -d 'Run in a worktree before its first build, and again when a path matching `arbiter.setupInputs` changed; exit ≠ 0 fails the attempt (retryable, step `setup`) [default: `arbiter.setup`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l keep-losers -d 'Keep the losers\' worktrees and branches'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l json -d 'Print the summary (with the pick record) as versioned JSON on stdout'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -l no-pool -d 'Fresh worktrees: one created and removed per attempt instead of reused pooled ones [default: `arbiter.pool`, on]'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pick" -l min-score -d 'Nothing below this score wins' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pick" -l json -d 'Print `{"version":2,"winner":<instance>|null,"order":[…]}`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pick" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand demo" -l keep -d 'Keep the demo repository and print where it is'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand demo" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -l into -d 'The integration branch [default: the current branch; on a detached HEAD, the checked-out commit]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -l remote -d 'Fetch the state and the integration branch from this git remote first (`round --remote`); nothing is pushed' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -l json -d 'Print `{"version":2,"orders":[…]}` instead of a table'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and not __fish_seen_subcommand_from add remove list help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and not __fish_seen_subcommand_from add remove list help" -f -a "add" -d 'Create branch `arbiter/<id>` at REV and a linked worktree for it'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and not __fish_seen_subcommand_from add remove list help" -f -a "remove" -d 'Remove the worktree of `<id>` (discarding what a builder left in it) and delete branch `arbiter/<id>`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and not __fish_seen_subcommand_from add remove list help" -f -a "list" -d 'List git-arbiter\'s worktrees: name, branch, commit and path'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and not __fish_seen_subcommand_from add remove list help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from add" -l base -d 'Start the branch here [default: the integration branch\'s tip]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from add" -l into -d 'The integration branch whose tip is the default base [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from add" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from remove" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from list" -l json -d 'Print `{"version":2,"worktrees":[{"name","path","branch","head","prunable"}]}`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from list" -s h -l help -d 'Print help'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from help" -f -a "add" -d 'Create branch `arbiter/<id>` at REV and a linked worktree for it'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from help" -f -a "remove" -d 'Remove the worktree of `<id>` (discarding what a builder left in it) and delete branch `arbiter/<id>`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from help" -f -a "list" -d 'List git-arbiter\'s worktrees: name, branch, commit and path'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand worktree; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -l into -d 'The integration branch [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -l drift-scope -d 'Check drift against the order\'s own declared files, or, more loosely, against the union of the declared files of the batch `git arbiter batch` would select now' -r -f -a "own\t''
batch\t''"
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -l gate -d 'Gate command (repeatable), run on the merged result before the branch moves [default: `arbiter.gate`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -l verify -d '`merged` (gates run on the merged result before the branch moves) or `none` [default: `arbiter.verify`, else merged when a gate is configured]' -r -f -a "merged\t''
none\t''"
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -l timeout -d 'Per-gate time limit, e.g. `90s`, `10m` [default: `arbiter.timeout`, else none]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -l json -d 'Print `{"version":2,"merged":…}` on stdout'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l max -d 'At most this many work orders in the batch [default: `arbiter.maxBatch`, else 8]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l into -d 'The integration branch [default: the current branch; on a detached HEAD, the checked-out commit]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l json -d 'Print JSON instead of text'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand lint" -l into -d 'The integration branch [default: the current branch; on a detached HEAD, the checked-out commit]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand lint" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand lint" -l json -d 'Print `{"version":2,"errors":n,"warnings":n,"findings":[{"path","line","severity","message","hint"}]}`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand lint" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand clear" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand clear" -l all -d 'Clear every halted work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand clear" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -l into -d 'The integration branch [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -l gate -d 'Gate command (repeatable), run on the merged result before the branch moves [default: `arbiter.gate`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -l verify -d '`merged` (gates run on the merged result before the branch moves) or `none` [default: `arbiter.verify`, else merged when a gate is configured]' -r -f -a "merged\t''
none\t''"
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -l timeout -d 'Per-gate time limit, e.g. `90s`, `10m` [default: `arbiter.timeout`, else none]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -l rebuild -d 'Lift the halt and build the order afresh in the next round'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand halt" -l reason -d 'Why it is halted (one line; shown by status and in the escalation)' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand halt" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand halt" -s h -l help -d 'Print help'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and not __fish_seen_subcommand_from status run help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and not __fish_seen_subcommand_from status run help" -f -a "status" -d 'Show the cap, the holders (pid, cap, since, work order, repo) and the waiters'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and not __fish_seen_subcommand_from status run help" -f -a "run" -d 'Hold one slot while CMD runs, for hooks and scripts'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and not __fish_seen_subcommand_from status run help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from status" -l max-total -d 'The cap to report [default: `arbiter.maxTotal`, else 6]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from status" -l json -d 'Print `{"version":2,"dir":…,"cap":…,"used":…,"holders":[…],"waiters":[…]}`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from run" -l max-total -d 'The machine-wide cap [default: `arbiter.maxTotal`, else 6]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from run" -l label -d 'What `slot status` shows for this holder [default: CMD]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from run" -l no-wait -d 'Exit 5 at once instead of waiting when no slot is free'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from run" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from help" -f -a "status" -d 'Show the cap, the holders (pid, cap, since, work order, repo) and the waiters'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from help" -f -a "run" -d 'Hold one slot while CMD runs, for hooks and scripts'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand slot; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand stop" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand sync" -l remote -d 'The git remote [default: `arbiter.remote`, else `origin`]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand sync" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand log" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand log" -l json -d 'Print `{"version":2,"events":[…]}`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand log" -s h -l help -d 'Print help'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand show" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand show" -l json -d 'Print `{"version":2,…}` instead of text'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand show" -s p -l patch -d 'Add the full patch of the changes'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand show" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand report" -l html -d 'Write the timeline as an HTML page' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand report" -l svg -d 'Write the timeline as an SVG picture' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand report" -l run -d 'Only the attempts of run ID: the conductor named on their dispatch (`claim … conductor=ID`)' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand report" -l since -d 'Only the attempts with an event recorded after REV, a commit of `refs/notes/arbiter` (e.g. `refs/notes/arbiter@{1}`)' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand report" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand report" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand doctor" -l into -d 'The integration branch [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand doctor" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand doctor" -l fix -d 'Repair what is provably git-arbiter\'s and not held by a live process'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand doctor" -l json -d 'Print the report as JSON'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and not __fish_seen_subcommand_from status prune help" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and not __fish_seen_subcommand_from status prune help" -f -a "status" -d 'List the pooled worktrees: state, branch, holder, base, ignored bytes, last setup'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and not __fish_seen_subcommand_from status prune help" -f -a "prune" -d 'Remove free pooled worktrees beyond `arbiter.poolSize` (least recently used first) and broken or half-made ones'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and not __fish_seen_subcommand_from status prune help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and __fish_seen_subcommand_from status" -l json -d 'Print `{"version":2,"worktrees":[{name, path, state, branch, held_by, base, ignored_bytes, last_setup_tree, last_setup_at, last_use}]}`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and __fish_seen_subcommand_from prune" -l all -d 'Remove every free pooled worktree, not only those beyond the pool size'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and __fish_seen_subcommand_from prune" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "status" -d 'List the pooled worktrees: state, branch, holder, base, ignored bytes, last setup'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "prune" -d 'Remove free pooled worktrees beyond `arbiter.poolSize` (least recently used first) and broken or half-made ones'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand pool; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand install-docs" -l prefix -d 'Install under DIR instead of `$XDG_DATA_HOME` (else `~/.local/share`)' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand install-docs" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "round" -d 'Run work orders: built concurrently in their own worktrees, landed through a verified merge queue'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "race" -d 'Best-of-N: build N instances of one work order, merge the best one back'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "pick" -d 'Choose the best of N candidates read from stdin (the selection kernel)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "demo" -d 'Run a full round on a built-in example, in a temporary repository'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "status" -d 'Show every work order\'s state: the reconcile table'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "worktree" -d 'Create, remove and list git-arbiter\'s linked worktrees'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "merge-back" -d 'Merge a work order\'s branch `arbiter/<id>` into the integration branch'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "batch" -d 'Select the next batch: eligible work orders whose declared files are pairwise disjoint'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "lint" -d 'Check the work orders: every error at once, and what is probably not meant'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "clear" -d 'Lift the HALT of work orders: the only way a halted order runs again'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "retry" -d 'Land kept work again after fixing its order: a halted merge, or work waiting to land'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "halt" -d 'Halt a work order by hand: it is never selected, built or merged until `git arbiter clear`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "slot" -d 'Machine-wide build slots: who holds them, or hold one around a command'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "stop" -d 'Ask the running conductors (`round`, `race`) of this repository to stop'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "sync" -d 'Bring this clone\'s state (`refs/notes/arbiter`) and a git remote\'s together'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "log" -d 'Show the disposition history of every work order, oldest first, from `refs/notes/arbiter`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "show" -d 'Show the evidence for reviewing one work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "report" -d 'Draw where the time of a run went, from `refs/notes/arbiter` alone'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "doctor" -d 'Find, and with --fix repair, what crashes and killed processes leave behind'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "pool" -d 'Show and prune the pool of warm worktrees'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "install-docs" -d 'Install the man pages and shell completions where `man` and the shells find them'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and __fish_seen_subcommand_from worktree" -f -a "add" -d 'Create branch `arbiter/<id>` at REV and a linked worktree for it'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and __fish_seen_subcommand_from worktree" -f -a "remove" -d 'Remove the worktree of `<id>` (discarding what a builder left in it) and delete branch `arbiter/<id>`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and __fish_seen_subcommand_from worktree" -f -a "list" -d 'List git-arbiter\'s worktrees: name, branch, commit and path'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and __fish_seen_subcommand_from slot" -f -a "status" -d 'Show the cap, the holders (pid, cap, since, work order, repo) and the waiters'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and __fish_seen_subcommand_from slot" -f -a "run" -d 'Hold one slot while CMD runs, for hooks and scripts'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "status" -d 'List the pooled worktrees: state, branch, holder, base, ignored bytes, last setup'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and __fish_seen_subcommand_from pool" -f -a "prune" -d 'Remove free pooled worktrees beyond `arbiter.poolSize` (least recently used first) and broken or half-made ones'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand clear" -f -a "(git arbiter complete-ids 2>/dev/null)" -d 'work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand halt" -f -a "(git arbiter complete-ids 2>/dev/null)" -d 'work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand race" -f -a "(git arbiter complete-ids 2>/dev/null)" -d 'work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand log" -f -a "(git arbiter complete-ids 2>/dev/null)" -d 'work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand retry" -f -a "(git arbiter complete-ids 2>/dev/null)" -d 'work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand merge-back" -f -a "(git arbiter complete-ids 2>/dev/null)" -d 'work order'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand show" -f -a "(git arbiter complete-ids 2>/dev/null)" -d 'work order'
