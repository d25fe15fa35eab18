"""Name normalisation on real spellings seen in H200 exports of the same kernels."""

from __future__ import annotations

import pytest

from profiler_core.attribution.names import clean_op_name, kernel_base_name, kernel_join_key, parse_nvtx_op


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # two ncu exports of one kernel (notes/device.md)
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1>>",
         "void at::vectorized_elementwise_kernel<4, at::FillFunctor<float>, std::array<char*, 1>>"),
        ("elemWiseRNNcell<float, float, float, (cudnnRNNMode_t)3, (cudnnRNNBiasMode_t)2, (cudnnRNNClipMode_t)0>",
         "elemWiseRNNcell<float, float, float, 3, 2, 0>"),
        # demangled with parameters (nsys) vs function name (ncu default)
        ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>(at::native::ReduceOp<float>)",
         "at::native::reduce_kernel<512, 1, at::native::ReduceOp<float>>"),
    ],
    ids=["at-native", "cudnn-enum-cast", "parameter-list"],
)
def test_real_spelling_pairs_join(a: str, b: str) -> None:
    assert kernel_join_key(a) == kernel_join_key(b)


def test_short_name_matches_base_name() -> None:
    demangled = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T)"
    assert kernel_base_name(demangled) == "vectorized_elementwise_kernel"
    assert kernel_join_key("triton_poi_fused_addmm_relu_0") == "triton_poi_fused_addmm_relu_0"


def test_distinct_kernels_stay_distinct() -> None:
    assert kernel_join_key("gemm<float, 64>") != kernel_join_key("gemm<float, 128>")


def test_parse_nvtx_operator_range() -> None:
    op = parse_nvtx_op("aten::mm, op_id = 7, sizes = [[512, 256], [256, 256], [512, 256]], input_op_ids = [(0,-1)]")
    assert op is not None
    assert (op.name, op.op_id) == ("aten::mm", 7)
    assert op.input_shapes == ((512, 256), (256, 256), (512, 256))
    assert parse_nvtx_op("aten::addmm, seq = 28, op_id = 31").seq == 28  # type: ignore[union-attr]


@pytest.mark.parametrize("text", ["## Call CompiledFxGraph fv3k ##, op_id = 5", "Torch-Compiled Region: 0/0, op_id = 2",
                                  "TorchDynamo Cache Lookup, op_id = 1", ""])
def test_non_operator_ranges_are_not_operators(text: str) -> None:
    assert parse_nvtx_op(text) is None


@pytest.mark.parametrize(("raw", "clean"), [("aten.addmm", "aten::addmm"), ("aten::add.Tensor", "aten::add"),
                                             ("aten::addmm, seq = 28, op_id = 31", "aten::addmm"),
                                             ("c10d::allreduce_", "c10d::allreduce_")])
def test_clean_op_name(raw: str, clean: str) -> None:
    assert clean_op_name(raw) == clean


# One kernel as three H200 tools spelled it in one capture of examples/lstm_encoder.py
COPY_KINETO = ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<"
               "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
               "{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&, "
               "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
               "{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1}>(int, "
               "at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::"
               "{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}>"
               "(at::TensorIteratorBase&, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}"
               "::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(int)#1})")
COPY_NSYS = ("void at::native::elementwise_kernel<(int)128, (int)2, void at::native::gpu_kernel_impl_nocast<"
             "at::native::direct_copy_kernel_cuda(at::TensorIteratorBase &)::[lambda() (instance 3)]::operator ()() "
             "const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)]>"
             "(at::TensorIteratorBase &, "
             "const T1 &)::[lambda(int) (instance 1)]>(int, T3)")
COPY_NCU = ("void at::elementwise_kernel<128, 2, void at::gpu_kernel_impl_nocast<at::direct_copy_kernel_cuda("
            "at::TensorIteratorBase &)::::operator ()() const::::operator ()() const::>(at::TensorIteratorBase &, "
            "const T1 &)::>(int, T3)")
ADD_NCU = ("void at::elementwise_kernel<128, 2, void at::gpu_kernel_impl_nocast<at::CUDAFunctor_add<float>>("
           "at::TensorIteratorBase &, const T1 &)::>(int, T3)")


def test_three_demanglers_meet_on_the_skeleton() -> None:
    from profiler_core.attribution.names import choose_name_key, kernel_skeleton

    assert kernel_skeleton(COPY_KINETO) == kernel_skeleton(COPY_NSYS) == kernel_skeleton(COPY_NCU)
    assert kernel_skeleton(ADD_NCU) != kernel_skeleton(COPY_NCU)  # distinct kernels stay distinct
    key, label = choose_name_key([COPY_KINETO], [COPY_NSYS, COPY_NCU])
    assert label == "skeleton" and key(COPY_NSYS) == key(COPY_KINETO)


def test_template_arguments_meet_across_the_tools_spellings() -> None:
    from profiler_core.attribution.names import template_arguments

    # ncu (demangled its way) and Kineto spell one instantiation differently; the plain arguments meet
    ncu = ("void cuda::kernelHistogram1D<long, long, long, 1, 2, (int)-1, 0, bool cuda::CUDA_tensor_histogram"
           "<long, long, 0>(at::Tensor)::[lambda(long) (instance 2)]>(cuda::detail::TensorInfo<T1, T3>)")
    kineto = ("void at::cuda::kernelHistogram1D<long, long, long, 1, 2, -1, (at::cuda::CUDAHistogramMemoryType)0, "
              "at::cuda::CUDA_tensor_histogram<long, long, (at::cuda::CUDAHistogramMemoryType)0>(at::Tensor)"
              "::{lambda(long)#2}>(at::cuda::detail::TensorInfo<long, long>)")
    assert template_arguments(ncu) == template_arguments(kineto) == ("long", "long", "long", "1", "2", "-1", "0")
    assert template_arguments(kineto.replace("<long, long, long,", "<int, int, long,")) != template_arguments(kineto)
    assert template_arguments("void at::native::sbtopk::gatherTopK<float, unsigned int, 2, false>(...)") == \
        template_arguments("void native::sbtopk::gatherTopK<float, unsigned int, 2, 0>(T1)")
    assert template_arguments("triton_poi_fused_add_0") == ()
