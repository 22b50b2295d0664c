import pytest

from paradnn import CNN, FC, RNN, Real, SpecError, Workload


def test_values_are_coerced_from_text_and_validated():
    spec = FC(layers="4", nodes=1024.0, input=2000, output=1000)
    assert (spec.layers, spec.nodes) == (4, 1024)
    assert CNN("Bottleneck", 1, 16, 64, 10).block == "bottleneck"
    assert RNN("LSTM", 1, 8, 4, 16).cell == "lstm"


@pytest.mark.parametrize(
    "build, parameter",
    [
        (lambda: FC(0, 8, 8, 8), "layers"),
        (lambda: FC(4, -1, 8, 8), "nodes"),
        (lambda: FC(4, 8, 2.5, 8), "input"),
        (lambda: FC(4, 8, 8, "ten"), "output"),
        (lambda: FC(True, 8, 8, 8), "layers"),
        (lambda: CNN("dense", 1, 16, 64, 10), "block"),
        (lambda: CNN("residual", 1, 16, 16, 10), "image"),
        (lambda: CNN("residual", 0, 16, 64, 10), "blocks"),
        (lambda: RNN("transformer", 1, 8, 4, 16), "cell"),
        (lambda: RNN("gru", 1, 8, 0, 16), "length"),
        (lambda: Real("nosuchmodel"), "model"),
        (lambda: Workload(FC(1, 8, 8, 8), batch=0), "batch"),
        (lambda: Workload(FC(1, 8, 8, 8), batch=8, dtype="float64"), "dtype"),
        (lambda: Workload(FC(1, 8, 8, 8), batch=8, optimizer="lamb"), "optimizer"),
        (lambda: Workload(FC(1, 8, 8, 8), batch=9, devices=2), "batch"),
        (lambda: Workload(FC(1, 8, 8, 8), batch=8, devices=0), "devices"),
    ],
)
def test_invalid_values_name_parameter_value_and_allowed(build, parameter):
    with pytest.raises(SpecError) as info:
        build()
    assert info.value.parameter == parameter
    message = str(info.value)
    assert parameter in message and "allowed" in message


def test_values_outside_table2_but_buildable_are_allowed():
    # Table 2 stops at 128 layers / 16384 batch; users extrapolate.
    assert Workload(FC(256, 16, 16, 16), batch=32768).batch == 32768


def test_equal_workloads_have_equal_keys_and_default_optimizer_is_resolved():
    a = Workload(FC(4, 8, 8, 8), batch=8)
    b = Workload(FC(4, 8, 8, 8), batch=8, optimizer="rmsprop")
    assert a.optimizer == "rmsprop" and a.key == b.key
    assert a.key != Workload(FC(4, 8, 8, 8), batch=16).key
    assert a.key != Workload(FC(4, 8, 8, 8), batch=8, dtype="bfloat16").key
