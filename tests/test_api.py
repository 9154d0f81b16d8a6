"""The public API is spelled as documented (README's overview): every function and method exists."""

import pytest

import namedtensor as nt

FUNCTIONS = """
tensor as_tensor zeros ones empty full arange linspace eye rand randn randint zeros_like ones_like full_like
rand_like randn_like manual_seed align cat stack split chunk unbind pad gather index_select masked_fill where
matmul dot einsum outer grad no_grad enable_grad set_grad_enabled is_grad_enabled NamesError Tensor
neg abs exp log log1p expm1 sqrt rsqrt sin cos tan tanh sigmoid relu gelu silu softplus erf sign floor ceil
round clip reciprocal square maximum minimum logical_and logical_or logical_not sum mean prod max min amax amin
argmax argmin std var logsumexp norm any all cumsum cumprod softmax log_softmax sort argsort topk
float32 float64 float16 int32 int64 bool_ flip roll tile tril triu flatten unflatten squeeze unsqueeze
broadcast_to reshape rename refine_names align_to align_as permute transpose select narrow isel
""".split()

METHODS = """
names sizes shape ndim dtype device is_named array numpy item tolist rename refine_names align_to align_as
flatten unflatten permute transpose mT squeeze unsqueeze expand broadcast_to reshape view split chunk unbind
flip roll repeat tile tril triu isel select narrow index_select masked_fill neg abs exp log log1p expm1 sqrt
rsqrt sin cos tan tanh sigmoid relu gelu silu softplus erf sign floor ceil round clip reciprocal square
maximum minimum logical_and logical_or logical_not sum mean prod max min amax amin argmax argmin std var
logsumexp norm any all cumsum cumprod softmax log_softmax sort argsort topk matmul to float double half long
int bool clone detach backward register_hook retain_grad requires_grad_ grad add_ sub_ mul_ div_
masked_fill_ zero_ fill_ copy_ __getitem__ __setitem__ __matmul__ __add__ __sub__ __mul__ __truediv__
__floordiv__ __mod__ __pow__ __lt__ __le__ __gt__ __ge__ __eq__ __ne__ __len__ __iter__
""".split()


@pytest.mark.parametrize("name", FUNCTIONS)
def test_function_exists(name):
    assert hasattr(nt, name), f"nt.{name} is missing"


@pytest.mark.parametrize("name", METHODS)
def test_method_exists(name):
    assert hasattr(nt.Tensor, name), f"Tensor.{name} is missing"


def test_testing_tools_are_public():
    from namedtensor.testing import assert_close, gradcheck, gradgradcheck

    assert callable(gradcheck) and callable(gradgradcheck) and callable(assert_close)
    assert nt.testing.gradcheck is gradcheck


MODEL_API = {
    "nt": """save load set_num_threads get_num_threads nn optim data lift from_xarray to_xarray to_pandas from_dlpack
        Named NamesSpec check_names""",
    "nt.nn": """Module Parameter Sequential ModuleList ModuleDict Linear Embedding LayerNorm RMSNorm Dropout ReLU
        GELU SiLU Tanh Sigmoid Softmax LogSoftmax Identity MultiheadAttention MLP TransformerBlock functional init""",
    "nt.nn.functional": """linear softmax log_softmax cross_entropy nll_loss mse_loss dropout gelu relu silu sigmoid
        tanh layer_norm rms_norm embedding scaled_dot_product_attention causal_mask""",
    "nt.nn.init": """uniform_ normal_ constant_ zeros_ ones_ trunc_normal_ xavier_uniform_ xavier_normal_
        kaiming_uniform_ kaiming_normal_ calculate_gain""",
    "nt.optim": "Optimizer SGD Adam AdamW clip_grad_norm_ clip_grad_value_ lr_scheduler",
    "nt.optim.lr_scheduler": """LRScheduler StepLR MultiStepLR ExponentialLR CosineAnnealingLR LinearLR LambdaLR
        SequentialLR""",
    "nt.data": "Dataset TensorDataset DataLoader Generator",
}


@pytest.mark.parametrize("where,name", [(w, n) for w, names in MODEL_API.items() for n in names.split()])
def test_model_api_exists(where, name):
    import namedtensor.nn.functional  # noqa: F401 - makes nt.nn.functional reachable by attribute
    import namedtensor.optim.lr_scheduler  # noqa: F401

    obj = eval(where, {"nt": nt})
    assert hasattr(obj, name), f"{where}.{name} is missing"


@pytest.mark.parametrize("name", "to_xarray to_pandas __dlpack__ __dlpack_device__ _repr_html_ plot __array__ "
                                  "__array_ufunc__ __array_function__".split())
def test_conversion_methods_exist(name):
    assert callable(getattr(nt.Tensor, name, None)), f"Tensor.{name} is missing"


def test_readme_model_example_runs(tmp_path, monkeypatch):
    # the README's Models example, run as written (it saves a checkpoint in the working directory)
    import pathlib

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    section = readme[readme.index("## Models"):]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code, "README.md (Models)", "exec"), scope)
    assert scope["loss"].ndim == 0 and scope["loss"].item() > 0
    assert scope["model"].head.weight.names == ("vocab", "embed")
    assert (tmp_path / "ckpt.safetensors").exists()


def test_readme_interop_example_runs():
    import pathlib

    readme = (pathlib.Path(__file__).parents[1] / "README.md").read_text()
    section = readme[readme.index("## Conversion and interop"):]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    scope = {}
    exec(compile(code, "README.md (Conversion and interop)", "exec"), scope)
    assert scope["pool"](scope["x"]).names == ("batch", "embed")
    assert tuple(scope["da"].dims) == ("batch", "seq", "embed")
    trace = scope["trace"]
    assert trace.result.names == ("batch", "seq", "embed") and trace.result.shape == (4096, 2048, 8)
    assert "scaled_dot_product_attention" in trace.ops and trace.total_flops > 0
