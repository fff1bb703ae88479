# bash completion for slicelet(8)                          -*- shell-script -*-

_slicelet()
{
    local cur prev words cword
    _init_completion || return

    case $prev in
        --config)
            _filedir toml
            return
            ;;
        --log-level)
            COMPREPLY=($(compgen -W 'debug info warn error' -- "$cur"))
            return
            ;;
        --log-format)
            COMPREPLY=($(compgen -W 'auto text json journal' -- "$cur"))
            return
            ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W '--config --log-level --log-format --help' -- "$cur"))
        return
    fi

    local cmd='' i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
            --config | --log-level | --log-format) ((i++)) ;;
            -*) ;;
            *)
                cmd=${words[i]}
                break
                ;;
        esac
    done
    case $cmd in
        '') COMPREPLY=($(compgen -W 'run config help' -- "$cur")) ;;
        config) COMPREPLY=($(compgen -W 'check print' -- "$cur")) ;;
    esac
} &&
    complete -F _slicelet slicelet

# ex: filetype=sh
