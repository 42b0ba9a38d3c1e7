"""mxc's CPU kernels: Relax rewrites, legalizations to packed kernels, default TIR schedules.

The package is laid out in three floors (TVM's ``s_tir/dlight`` layout: a ``base/``
that imports no rule, rules that import only ``base/``), so that where a thing
lives says what may depend on it -- ``tests/compiler/test_import_rules.py`` holds
each import to it:

``base/`` -- shared machinery, importing nothing else of this package: facts read
  from TIR (``tir_queries``) and Relax (``module_utils``), the per-CPU cost rows
  (``microarch``), the register-tile model (``register_tile``), the elementwise
  block schedule (``elementwise``), the kernel-family stamp legalization writes and
  the rules read (``kernel_family``), the dot-product micro-kernel several families
  schedule with (``dot_kernel``), the int8 and bfloat16 dot-product steps and their
  tensor intrinsics on x86 and AArch64 (``int8_steps``, ``int8_avx2``,
  ``arm_dot_steps``, ``bf16_step``, ``arm_bf16_step``, one loop nest for both
  bfloat16 steps in ``bf16_dot_tir``), the AMX tile
  machinery (``amx``, ``amx_steps``) and the Winograd transforms and precision rule
  (``winograd_transforms``, ``winograd_precision``).
``families/`` -- one module per kernel family, each importing ``base/`` only: the
  float32 register-blocked reductions (``reduction``: direct and depthwise
  convolutions, pooling, dense), float32 Winograd (``winograd``), int8 on VNNI and
  AVX2 (``int8``), bfloat16 on ``vdpbf16ps`` (``bf16``), bfloat16 Winograd
  (``bf16_winograd``) and the AMX tiles (``int8_amx``, ``bf16_amx``).  A family
  builds its kernels (legalization), says whether a layer fits it, and schedules
  the kernels it built (its rule).
this level -- what picks among the families and runs them: the kernel-choice
  table (``kernel_choice``: every family, when a build enables it, its builders and
  its rule -- where a family may hand a layer to another, int8 or bf16 to the AMX
  tiles, bf16 to bf16 Winograd, the table passes that family's choice in), the
  legalizations that consult it once per layer (``legalize``, with the float32
  direct kernels no family takes), the schedule rules in the order they are tried
  (``cpu``: the table's family rules, then the generic ``elementwise`` and
  ``fallback``), the Relax rewrites before legalization (``layout``,
  ``channel_padding``, ``fold``, ``nan_select``, ``pool_padding``), the TIR passes
  (``tir_pipeline``) and the pipeline that strings them together (``pipeline``).

A kernel is chosen once and carried as data: legalization stamps the family it chose
on the kernel's anchor block (the annotation :data:`.base.kernel_family.FAMILY_ATTR`;
the int8 family also its per-layer dot-product step,
:data:`.base.int8_steps.STEP_ATTR`), and a family's rule applies to the kernels
stamped with its name -- never to a kernel recognised by its or a block's name, and
without asking the CPU again (:mod:`.base.kernel_family` says why an annotation).
"""
