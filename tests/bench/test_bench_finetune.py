from detect.bench.finetune import parse_args


def test_also_val_takes_several_specs_and_leaves_train_flags_after_the_separator():
    args = parse_args(["--data", "a.yaml", "--also-val", "held.yaml", "other.yaml", "--", "--hyp", "h.yaml"])
    assert args.also_val == ["held.yaml", "other.yaml"] and args.train_args == ["--hyp", "h.yaml"]
    assert parse_args(["--data", "a.yaml"]).also_val == []
