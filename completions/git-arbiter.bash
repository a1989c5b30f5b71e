_git__arbiter() {
    local i cur prev opts cmd
    COMPREPLY=()
    if [[ "${BASH_VERSINFO[0]}" -ge 4 ]]; then
        cur="$2"
    else
        cur="${COMP_WORDS[COMP_CWORD]}"
    fi
    prev="$3"
    cmd=""
    opts=""

    for i in "${COMP_WORDS[@]:0:COMP_CWORD}"
    do
        case "${cmd},${i}" in
            ",$1")
                cmd="git__arbiter"
                ;;
            git__arbiter,batch)
                cmd="git__arbiter__subcmd__batch"
                ;;
            git__arbiter,clear)
                cmd="git__arbiter__subcmd__clear"
                ;;
            git__arbiter,demo)
                cmd="git__arbiter__subcmd__demo"
                ;;
            git__arbiter,doctor)
                cmd="git__arbiter__subcmd__doctor"
                ;;
            git__arbiter,halt)
                cmd="git__arbiter__subcmd__halt"
                ;;
            git__arbiter,help)
                cmd="git__arbiter__subcmd__help"
                ;;
            git__arbiter,install-docs)
                cmd="git__arbiter__subcmd__install__subcmd__docs"
                ;;
            git__arbiter,lint)
                cmd="git__arbiter__subcmd__lint"
                ;;
            git__arbiter,log)
                cmd="git__arbiter__subcmd__log"
                ;;
            git__arbiter,merge-back)
                cmd="git__arbiter__subcmd__merge__subcmd__back"
                ;;
            git__arbiter,pick)
                cmd="git__arbiter__subcmd__pick"
                ;;
            git__arbiter,pool)
                cmd="git__arbiter__subcmd__pool"
                ;;
            git__arbiter,race)
                cmd="git__arbiter__subcmd__race"
                ;;
            git__arbiter,report)
                cmd="git__arbiter__subcmd__report"
                ;;
            git__arbiter,retry)
                cmd="git__arbiter__subcmd__retry"
                ;;
            git__arbiter,round)
                cmd="git__arbiter__subcmd__round"
                ;;
            git__arbiter,show)
                cmd="git__arbiter__subcmd__show"
                ;;
            git__arbiter,slot)
                cmd="git__arbiter__subcmd__slot"
                ;;
            git__arbiter,status)
                cmd="git__arbiter__subcmd__status"
                ;;
            git__arbiter,stop)
                cmd="git__arbiter__subcmd__stop"
                ;;
            git__arbiter,sync)
                cmd="git__arbiter__subcmd__sync"
                ;;
            git__arbiter,worktree)
                cmd="git__arbiter__subcmd__worktree"
                ;;
            git__arbiter__subcmd__help,batch)
                cmd="git__arbiter__subcmd__help__subcmd__batch"
                ;;
            git__arbiter__subcmd__help,clear)
                cmd="git__arbiter__subcmd__help__subcmd__clear"
                ;;
            git__arbiter__subcmd__help,demo)
                cmd="git__arbiter__subcmd__help__subcmd__demo"
                ;;
            git__arbiter__subcmd__help,doctor)
                cmd="git__arbiter__subcmd__help__subcmd__doctor"
                ;;
            git__arbiter__subcmd__help,halt)
                cmd="git__arbiter__subcmd__help__subcmd__halt"
                ;;
            git__arbiter__subcmd__help,help)
                cmd="git__arbiter__subcmd__help__subcmd__help"
                ;;
            git__arbiter__subcmd__help,install-docs)
                cmd="git__arbiter__subcmd__help__subcmd__install__subcmd__docs"
                ;;
            git__arbiter__subcmd__help,lint)
                cmd="git__arbiter__subcmd__help__subcmd__lint"
                ;;
            git__arbiter__subcmd__help,log)
                cmd="git__arbiter__subcmd__help__subcmd__log"
                ;;
            git__arbiter__subcmd__help,merge-back)
                cmd="git__arbiter__subcmd__help__subcmd__merge__subcmd__back"
                ;;
            git__arbiter__subcmd__help,pick)
                cmd="git__arbiter__subcmd__help__subcmd__pick"
                ;;
            git__arbiter__subcmd__help,pool)
                cmd="git__arbiter__subcmd__help__subcmd__pool"
                ;;
            git__arbiter__subcmd__help,race)
                cmd="git__arbiter__subcmd__help__subcmd__race"
                ;;
            git__arbiter__subcmd__help,report)
                cmd="git__arbiter__subcmd__help__subcmd__report"
                ;;
            git__arbiter__subcmd__help,retry)
                cmd="git__arbiter__subcmd__help__subcmd__retry"
                ;;
            git__arbiter__subcmd__help,round)
                cmd="git__arbiter__subcmd__help__subcmd__round"
                ;;
            git__arbiter__subcmd__help,show)
                cmd="git__arbiter__subcmd__help__subcmd__show"
                ;;
            git__arbiter__subcmd__help,slot)
                cmd="git__arbiter__subcmd__help__subcmd__slot"
                ;;
            git__arbiter__subcmd__help,status)
                cmd="git__arbiter__subcmd__help__subcmd__status"
                ;;
            git__arbiter__subcmd__help,stop)
                cmd="git__arbiter__subcmd__help__subcmd__stop"
                ;;
            git__arbiter__subcmd__help,sync)
                cmd="git__arbiter__subcmd__help__subcmd__sync"
                ;;
            git__arbiter__subcmd__help,worktree)
                cmd="git__arbiter__subcmd__help__subcmd__worktree"
                ;;
            git__arbiter__subcmd__help__subcmd__pool,prune)
                cmd="git__arbiter__subcmd__help__subcmd__pool__subcmd__prune"
                ;;
            git__arbiter__subcmd__help__subcmd__pool,status)
                cmd="git__arbiter__subcmd__help__subcmd__pool__subcmd__status"
                ;;
            git__arbiter__subcmd__help__subcmd__slot,run)
                cmd="git__arbiter__subcmd__help__subcmd__slot__subcmd__run"
                ;;
            git__arbiter__subcmd__help__subcmd__slot,status)
                cmd="git__arbiter__subcmd__help__subcmd__slot__subcmd__status"
                ;;
            git__arbiter__subcmd__help__subcmd__worktree,add)
                cmd="git__arbiter__subcmd__help__subcmd__worktree__subcmd__add"
                ;;
            git__arbiter__subcmd__help__subcmd__worktree,list)
                cmd="git__arbiter__subcmd__help__subcmd__worktree__subcmd__list"
                ;;
            git__arbiter__subcmd__help__subcmd__worktree,remove)
                cmd="git__arbiter__subcmd__help__subcmd__worktree__subcmd__remove"
                ;;
            git__arbiter__subcmd__pool,help)
                cmd="git__arbiter__subcmd__pool__subcmd__help"
                ;;
            git__arbiter__subcmd__pool,prune)
                cmd="git__arbiter__subcmd__pool__subcmd__prune"
                ;;
            git__arbiter__subcmd__pool,status)
                cmd="git__arbiter__subcmd__pool__subcmd__status"
                ;;
            git__arbiter__subcmd__pool__subcmd__help,help)
                cmd="git__arbiter__subcmd__pool__subcmd__help__subcmd__help"
                ;;
            git__arbiter__subcmd__pool__subcmd__help,prune)
                cmd="git__arbiter__subcmd__pool__subcmd__help__subcmd__prune"
                ;;
            git__arbiter__subcmd__pool__subcmd__help,status)
                cmd="git__arbiter__subcmd__pool__subcmd__help__subcmd__status"
                ;;
            git__arbiter__subcmd__slot,help)
                cmd="git__arbiter__subcmd__slot__subcmd__help"
                ;;
            git__arbiter__subcmd__slot,run)
                cmd="git__arbiter__subcmd__slot__subcmd__run"
                ;;
            git__arbiter__subcmd__slot,status)
                cmd="git__arbiter__subcmd__slot__subcmd__status"
                ;;
            git__arbiter__subcmd__slot__subcmd__help,help)
                cmd="git__arbiter__subcmd__slot__subcmd__help__subcmd__help"
                ;;
            git__arbiter__subcmd__slot__subcmd__help,run)
                cmd="git__arbiter__subcmd__slot__subcmd__help__subcmd__run"
                ;;
            git__arbiter__subcmd__slot__subcmd__help,status)
                cmd="git__arbiter__subcmd__slot__subcmd__help__subcmd__status"
                ;;
            git__arbiter__subcmd__worktree,add)
                cmd="git__arbiter__subcmd__worktree__subcmd__add"
                ;;
            git__arbiter__subcmd__worktree,help)
                cmd="git__arbiter__subcmd__worktree__subcmd__help"
                ;;
            git__arbiter__subcmd__worktree,list)
                cmd="git__arbiter__subcmd__worktree__subcmd__list"
                ;;
            git__arbiter__subcmd__worktree,remove)
                cmd="git__arbiter__subcmd__worktree__subcmd__remove"
                ;;
            git__arbiter__subcmd__worktree__subcmd__help,add)
                cmd="git__arbiter__subcmd__worktree__subcmd__help__subcmd__add"
                ;;
            git__arbiter__subcmd__worktree__subcmd__help,help)
                cmd="git__arbiter__subcmd__worktree__subcmd__help__subcmd__help"
                ;;
            git__arbiter__subcmd__worktree__subcmd__help,list)
                cmd="git__arbiter__subcmd__worktree__subcmd__help__subcmd__list"
                ;;
            git__arbiter__subcmd__worktree__subcmd__help,remove)
                cmd="git__arbiter__subcmd__worktree__subcmd__help__subcmd__remove"
                ;;
            *)
                ;;
        esac
    done

    case "${cmd}" in
        git__arbiter)
            opts="-h -V --help --version round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 1 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__batch)
            opts="-h --max --json --into --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__clear)
            opts="-h --all --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__demo)
            opts="-h --keep --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__doctor)
            opts="-h --fix --json --into --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__halt)
            opts="-h --reason --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --reason)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help)
            opts="round race pick demo status worktree merge-back batch lint clear retry halt slot stop sync log show report doctor pool install-docs help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__batch)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__clear)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__demo)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__doctor)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__halt)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__install__subcmd__docs)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__lint)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__log)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__merge__subcmd__back)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__pick)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__pool)
            opts="status prune"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__pool__subcmd__prune)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__pool__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__race)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__report)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__retry)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__round)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__show)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__slot)
            opts="status run"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__slot__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__slot__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__stop)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__sync)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__worktree)
            opts="add remove list"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__worktree__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__worktree__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__help__subcmd__worktree__subcmd__remove)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__install__subcmd__docs)
            opts="-h --prefix --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --prefix)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__lint)
            opts="-h --json --into --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__log)
            opts="-h --json --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__merge__subcmd__back)
            opts="-h --into --drift-scope --json --gate --verify --timeout --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drift-scope)
                    COMPREPLY=($(compgen -W "own batch" -- "${cur}"))
                    return 0
                    ;;
                --gate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify)
                    COMPREPLY=($(compgen -W "merged none" -- "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pick)
            opts="-h --min-score --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --min-score)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pool)
            opts="-h --help status prune help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pool__subcmd__help)
            opts="status prune help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pool__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pool__subcmd__help__subcmd__prune)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pool__subcmd__help__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pool__subcmd__prune)
            opts="-h --all --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__pool__subcmd__status)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__race)
            opts="-n -h --build --gate --score --min-score --keep-losers --into --max-total --timeout --json --verify --no-pool --setup --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                -n)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --build)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --score)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --min-score)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-total)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify)
                    COMPREPLY=($(compgen -W "merged none" -- "${cur}"))
                    return 0
                    ;;
                --setup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__report)
            opts="-h --html --svg --run --since --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --html)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --svg)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --run)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --since)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__retry)
            opts="-h --rebuild --into --gate --verify --timeout --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --verify)
                    COMPREPLY=($(compgen -W "merged none" -- "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__round)
            opts="-h --build --gate --critic --final-gate --budget-cmd --max-cost --into --max --max-total --once --schedule --verify --remote --dry-run --json --timeout --drift-scope --no-pool --setup --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --build)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --gate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --critic)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --final-gate)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --budget-cmd)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-cost)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --max-total)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --schedule)
                    COMPREPLY=($(compgen -W "continuous rounds" -- "${cur}"))
                    return 0
                    ;;
                --verify)
                    COMPREPLY=($(compgen -W "merged none" -- "${cur}"))
                    return 0
                    ;;
                --remote)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --timeout)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --drift-scope)
                    COMPREPLY=($(compgen -W "own batch" -- "${cur}"))
                    return 0
                    ;;
                --setup)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__show)
            opts="-p -h --json --patch --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts} $(__git_arbiter_ids)" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__slot)
            opts="-h --help status run help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__slot__subcmd__help)
            opts="status run help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__slot__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__slot__subcmd__help__subcmd__run)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__slot__subcmd__help__subcmd__status)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__slot__subcmd__run)
            opts="-h --max-total --no-wait --label --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --max-total)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --label)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__slot__subcmd__status)
            opts="-h --json --max-total --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --max-total)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__status)
            opts="-h --json --into --remote --orders --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --remote)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --orders)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__stop)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__sync)
            opts="-h --remote --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --remote)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree)
            opts="-h --help add remove list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 2 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__add)
            opts="-h --base --into --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                --base)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                --into)
                    COMPREPLY=($(compgen -f "${cur}"))
                    return 0
                    ;;
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__help)
            opts="add remove list help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__help__subcmd__add)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__help__subcmd__help)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__help__subcmd__list)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__help__subcmd__remove)
            opts=""
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 4 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__list)
            opts="-h --json --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
        git__arbiter__subcmd__worktree__subcmd__remove)
            opts="-h --help"
            if [[ ${cur} == -* || ${COMP_CWORD} -eq 3 ]] ; then
                COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
                return 0
            fi
            case "${prev}" in
                *)
                    COMPREPLY=()
                    ;;
            esac
            COMPREPLY=( $(compgen -W "${opts}" -- "${cur}") )
            return 0
            ;;
    esac
}

if [[ "${BASH_VERSINFO[0]}" -eq 4 && "${BASH_VERSINFO[1]}" -ge 4 || "${BASH_VERSINFO[0]}" -gt 4 ]]; then
    complete -F _git__arbiter -o nosort -o bashdefault -o default git-arbiter
else
    complete -F _git__arbiter -o bashdefault -o default git-arbiter
fi

# The work orders of the repository at hand, for an id argument; through
# git's completion, of the repository `git -C <dir>` names.
__git_arbiter_ids() {
    git ${__git_C_args:+"${__git_C_args[@]}"} arbiter complete-ids 2>/dev/null
}

# `git arbiter <TAB>` through git's own bash completion, which calls
# _git_arbiter with COMP_WORDS holding the whole `git … arbiter …` line.
_git_arbiter() {
    local i start=0
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ "${COMP_WORDS[i]}" == arbiter ]]; then
            start=$i
            break
        fi
    done
    if ((start == 0)); then
        return 0
    fi
    local COMP_WORDS=(git-arbiter "${COMP_WORDS[@]:start+1}")
    local COMP_CWORD=$((COMP_CWORD - start))
    _git__arbiter git-arbiter "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
    for i in "${!COMPREPLY[@]}"; do
        if [[ ! -d "${COMPREPLY[i]}" && "${COMPREPLY[i]}" != *= ]]; then
            COMPREPLY[i]="${COMPREPLY[i]} "
        fi
    done
}
