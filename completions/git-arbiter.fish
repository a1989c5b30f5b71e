# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_git_arbiter_global_optspecs
    string join \n orders= h/help V/version
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

complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -s V -l version -d 'Print version'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "status" -d 'Show every work order\'s state: the reconcile table'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "batch" -d 'Select the next batch: eligible work orders whose declared files are pairwise disjoint'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "clear" -d 'Lift a work order\'s HALT: the only way a halted order runs again'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "halt" -d 'Halt a work order by hand: it is never selected, built or merged until `git arbiter clear`'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "generate" -d 'Generate the man pages or a shell completion script from the command definitions'
complete -c git-arbiter -n "__fish_git_arbiter_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -l into -d 'The integration branch [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -l json -d 'Print `{"version":1,"orders":[…]}` instead of a table'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand status" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l max -d 'At most this many work orders in the batch [default: `arbiter.maxBatch`, else 8]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l into -d 'The integration branch [default: the current branch]' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -l json -d 'Print JSON (the default; kept for symmetry with the other plumbing commands)'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand batch" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand clear" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand clear" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand halt" -l reason -d 'Why it is halted (one line; shown by status and in the escalation)' -r
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand halt" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand halt" -s h -l help -d 'Print help'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand generate" -l out -d 'Write the file(s) into DIR (created if missing) instead of stdout. `man` writes `git-arbiter.1` plus one `git-arbiter-<subcommand>.1` per subcommand; on stdout it prints only `git-arbiter.1`' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand generate" -l orders -d 'Directory of work orders [default: `arbiter.orders`, else `work-orders/` at the worktree top]' -r -F
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand generate" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from status batch clear halt generate help" -f -a "status" -d 'Show every work order\'s state: the reconcile table'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from status batch clear halt generate help" -f -a "batch" -d 'Select the next batch: eligible work orders whose declared files are pairwise disjoint'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from status batch clear halt generate help" -f -a "clear" -d 'Lift a work order\'s HALT: the only way a halted order runs again'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from status batch clear halt generate help" -f -a "halt" -d 'Halt a work order by hand: it is never selected, built or merged until `git arbiter clear`'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from status batch clear halt generate help" -f -a "generate" -d 'Generate the man pages or a shell completion script from the command definitions'
complete -c git-arbiter -n "__fish_git_arbiter_using_subcommand help; and not __fish_seen_subcommand_from status batch clear halt generate help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
