# bash completion for slicectl(1)                          -*- shell-script -*-

_slicectl_pods()
{
    # Pod names from the running slicelet; nothing when it is not reachable.
    slicectl get pods -o name 2>/dev/null | sed 's|^pod/||'
}

_slicectl()
{
    local cur prev words cword
    _init_completion || return

    local commands='get describe apply delete logs node top gc explain help'
    local cmd='' sub='' i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            -*) ;;
            *)
                if [[ -z $cmd ]]; then
                    cmd=${words[i]}
                elif [[ -z $sub ]]; then
                    sub=${words[i]}
                fi
                ;;
        esac
    done

    case $prev in
        -f | --filename)
            _filedir '@(yaml|yml|json)'
            return
            ;;
        --config)
            _filedir toml
            return
            ;;
        --state | --observations)
            _filedir '@(json|yaml|yml)'
            return
            ;;
        --socket)
            _filedir
            return
            ;;
        -o | --output)
            case $cmd in
                get) COMPREPLY=($(compgen -W 'wide json yaml name' -- "$cur")) ;;
                node) COMPREPLY=($(compgen -W 'json yaml' -- "$cur")) ;;
                *) COMPREPLY=($(compgen -W 'json' -- "$cur")) ;;
            esac
            return
            ;;
        --cgroup-mode)
            COMPREPLY=($(compgen -W 'v1 v2' -- "$cur"))
            return
            ;;
        --sort-by)
            COMPREPLY=($(compgen -W 'cpu memory' -- "$cur"))
            return
            ;;
        -n | --namespace | -c | --container | --tail | --capacity)
            return
            ;;
    esac

    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands --help" -- "$cur"))
        return
    fi

    local global='-n --namespace --socket --config'
    case $cmd in
        get)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W 'pods pod' -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$global -o --output -A --all-namespaces" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_slicectl_pods)" -- "$cur"))
            fi
            ;;
        describe | delete)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W 'pod' -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$global" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_slicectl_pods)" -- "$cur"))
            fi
            ;;
        apply)
            COMPREPLY=($(compgen -W "$global -f --filename --dry-run=server" -- "$cur"))
            ;;
        top)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W 'pods node' -- "$cur"))
            elif [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$global --containers -A --all-namespaces --sort-by --sum --no-headers" -- "$cur"))
            elif [[ $sub == pod* ]]; then
                COMPREPLY=($(compgen -W "$(_slicectl_pods)" -- "$cur"))
            fi
            ;;
        logs | log)
            if [[ $cur == -* || -n $sub ]]; then
                COMPREPLY=($(compgen -W "$global -c --container -f --follow -p --previous --tail" -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$(_slicectl_pods)" -- "$cur"))
            fi
            ;;
        node)
            COMPREPLY=($(compgen -W "$global -o --output" -- "$cur"))
            ;;
        gc)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W 'images containers' -- "$cur"))
            else
                COMPREPLY=($(compgen -W "$global --dry-run -o --output" -- "$cur"))
            fi
            ;;
        explain)
            if [[ -z $sub ]]; then
                COMPREPLY=($(compgen -W 'pod node gc eviction' -- "$cur"))
            else
                COMPREPLY=($(compgen -W '-f --filename --online --offline --config --socket --cgroup-mode --capacity --state --observations -o --output' -- "$cur"))
            fi
            ;;
    esac
} &&
    complete -F _slicectl slicectl

# ex: filetype=sh
