"""One object file per CPU instruction set, as the Makefile builds it.

The hot kernels are compiled once per ISA into namespace cpu::<isa>
(tf_ops/cpu/isa.h). Inline functions and template instances carry the same
names in every variant, so each variant is partially linked (`ld -r`), its COMDAT
groups dropped and every symbol outside cpu::<isa> made local (objcopy); then no
variant can borrow another's AVX-512 (or baseline) copy of a shared inline.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _isa_objects_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    objects = []
    for linker_input in ctx.attr.lib[CcInfo].linking_context.linker_inputs.to_list():
        if linker_input.owner != ctx.attr.lib.label:
            continue
        for library in linker_input.libraries:
            objects.extend(library.pic_objects or library.objects)
    if not objects:
        fail("%s: %s produced no object files" % (ctx.label, ctx.attr.lib.label))
    isa = ctx.attr.isa
    keep = "_ZN16tf_conv_backprop3cpu%d%s*" % (len(isa), isa)
    partial = ctx.actions.declare_file(ctx.label.name + ".partial.o")
    out = ctx.actions.declare_file(ctx.label.name + ".pic.o")
    tools = cc_toolchain.all_files
    ctx.actions.run(
        executable = cc_toolchain.ld_executable,
        arguments = ["-r"] + [o.path for o in objects] + ["-o", partial.path],
        inputs = depset(objects, transitive = [tools]),
        outputs = [partial],
        mnemonic = "IsaPartialLink",
        progress_message = "Partially linking the %s kernels" % isa,
    )
    ctx.actions.run(
        executable = cc_toolchain.objcopy_executable,
        arguments = ["-R", ".group", "--wildcard", "--keep-global-symbol=" + keep,
                     partial.path, out.path],
        inputs = depset([partial], transitive = [tools]),
        outputs = [out],
        mnemonic = "IsaLocalize",
        progress_message = "Localising the %s kernels' symbols" % isa,
    )
    return [DefaultInfo(files = depset([out]))]

isa_objects = rule(
    implementation = _isa_objects_impl,
    attrs = {
        "lib": attr.label(providers = [CcInfo], mandatory = True),
        "isa": attr.string(mandatory = True),
        "_cc_toolchain": attr.label(
            default = Label("@bazel_tools//tools/cpp:current_cc_toolchain"),
        ),
    },
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    fragments = ["cpp"],
)
