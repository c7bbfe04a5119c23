#compdef kafkatxn

_kafkatxn_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _KAFKATXN_COMPLETE=complete_zsh kafkatxn)
}

compdef _kafkatxn_completion kafkatxn
