# Bash completion for tensorkit's tools: tckpt, tcompile, tgen, trun, ttest.
# Installed as $(datadir)/bash-completion/completions/tensorkit.bash with a
# link under each tool's name, where bash-completion finds it on first use;
# or source it from ~/.bashrc.  Options come from the tool's own --help (read
# once per tool and command), so they cannot drift from what the tool takes.

# The long options that `$1 [$2] --help` lists, one per line, with '=' kept
# for those that take a value.
_tensorkit_options()
{
    local key="${1}_${2}" help
    key=${key//[^A-Za-z0-9_]/_}
    if [[ -z ${_tensorkit_cache[$key]+set} ]]; then
        help=$("$1" ${2:+"$2"} --help 2>/dev/null)
        _tensorkit_cache[$key]=$(grep -oE -- '--[A-Za-z0-9][-A-Za-z0-9_]*(\[?=)?' <<<"$help" |
            sed 's/\[=$//' | sort -u | awk '{ o[NR] = $0; v[$0] = 1 }
                END { for (i = 1; i <= NR; i++) if (!v[o[i] "="]) print o[i] }')
    fi
    printf '%s\n' "${_tensorkit_cache[$key]}"
}

# The commands a tool's --help lists under "Commands:" (tckpt, tcompile).
_tensorkit_commands()
{
    "$1" --help 2>/dev/null | awk '/^Commands:/ { on = 1; next } /^$/ { on = 0 }
        on && /^  [a-z]/ { print $1 }'
}

_tensorkit()
{
    declare -gA _tensorkit_cache 2>/dev/null
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
    local tool=${COMP_WORDS[0]} cmd="" i
    local commands
    commands=$(_tensorkit_commands "$tool")
    if [[ -n $commands ]]; then
        for ((i = 1; i < COMP_CWORD; i++)); do
            if [[ ${COMP_WORDS[i]} != -* ]] && grep -qx -- "${COMP_WORDS[i]}" <<<"$commands"; then
                cmd=${COMP_WORDS[i]}
                break
            fi
        done
        if [[ -z $cmd && $cur != -* ]]; then
            mapfile -t COMPREPLY < <(compgen -W "$commands" -- "$cur")
            return
        fi
    fi
    case $prev in
    -o | --output | -w | --weights | -i | --input | --junit | --durations | --log-dir | --sarif | \
        --header | --source | --autograd | --derivatives | --grads)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        return
        ;;
    esac
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$(_tensorkit_options "$tool" "$cmd")" -- "$cur")
        [[ ${COMPREPLY[0]} == *= ]] && compopt -o nospace 2>/dev/null
        return
    fi
    mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    compopt -o filenames 2>/dev/null
}

complete -F _tensorkit tckpt tcompile tgen trun ttest
