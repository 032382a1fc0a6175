"""The methods, one file each: GOOSE (`goose`, its SuffixDecoding-spine variant `goose_suffix`) and the peers it is
measured against (AR, PLD, Token Recycling, Lookahead, REST, balanced trees, SuffixDecoding). A new method is one
file here plus one YAML in conf/method/ (docs/adding.md)."""
