# families.cmake -- the gpt_neox, llama and qwen2 forwards against independent float64
# PyTorch forwards written from the architectures (tests/reference/ref_neox.py,
# tests/reference/ref_llama.py), through `attnsweep dump`, on random-weight model
# directories that tests/reference/families_io.py writes in the Hugging Face layout.
#
# Tolerances (checked by families_io.py compare): q, k, v and the visible scores
# |d| <= 1e-4 * max|ref| of each layer's tensor; pattern 2e-5 absolute (0 above the
# diagonal); logits_last 1e-4 * max|ref|. Every layer is captured unless LAYERS says
# otherwise. Together: rotary on 25 % and 100 % of the head, parallel and sequential
# residuals, GQA with 2 and 4 query heads per kv head, head_dim given apart from
# hidden_size, both rope_scaling types, tied and untied heads, a sharded BF16 file,
# L = 64, 1024 and 4096. The synth presets' files are checked the same way (below).

set(AS_FAM_DIR ${CMAKE_BINARY_DIR}/family-tests)
set(AS_FAM_IO ${CMAKE_SOURCE_DIR}/tests/reference/families_io.py)

# as_family_ref_test(NAME L LAYERS make-model arguments...): write the model, dump a
# window of L tokens, recompute it in PyTorch, compare; the files go when it passes.
function(as_family_ref_test name L layers)
  set(dir ${AS_FAM_DIR}/${name})
  string(REPLACE ";" " " make_args "${ARGN}")
  add_test(NAME family_ref_${name}
           COMMAND /bin/sh -c "rm -rf \"$3\" && \"$1\" \"$2\" make-model --out \"$3\" ${make_args} && \"$4\" dump --model \"$3\" --tokens \"$3/tokens.txt\" --length $5 --layers $6 --out \"$3.h5\" && \"$1\" \"$2\" compare --model \"$3\" --dump \"$3.h5\" && rm -rf \"$3\" \"$3.h5\""
                   sh ${AS_PYTHON} ${AS_FAM_IO} ${dir} $<TARGET_FILE:attnsweep> ${L} ${layers})
  set_tests_properties(family_ref_${name} PROPERTIES LABELS reference TIMEOUT 300
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endfunction()

# gpt_neox (Pythia): rotary 25 %, parallel residual, untied embed_out
as_family_ref_test(neox_L64 64 all --family gpt_neox --layers 3)
# rotary 100 %, the sequential residual, tied head
as_family_ref_test(neox_rot100_seq_tied_L64 64 all --family gpt_neox --layers 3 --rotary-pct 1.0
                   --sequential --tied)
as_family_ref_test(neox_L1024 1024 all --family gpt_neox --layers 2)
# llama: GQA 2 query heads per kv head, rope_scaling linear, untied
as_family_ref_test(llama_gqa2_L64 64 all --family llama --layers 3 --heads 4 --kv-heads 2
                   --rope-scaling {\\\"rope_type\\\":\\\"linear\\\",\\\"factor\\\":2.0})
# GQA 4, head_dim 16 with 8 heads over hidden 64 (H D = 128), tied, llama3 scaling
as_family_ref_test(llama_gqa4_hd_tied_L64 64 all --family llama --layers 2 --heads 8 --kv-heads 2
                   --head-dim 16 --tied
                   --rope-scaling {\\\"rope_type\\\":\\\"llama3\\\",\\\"factor\\\":8.0,\\\"low_freq_factor\\\":1.0,\\\"high_freq_factor\\\":4.0,\\\"original_max_position_embeddings\\\":64})
as_family_ref_test(llama_L1024 1024 all --family llama --layers 2 --heads 4 --kv-heads 1)
# L = 4096: a one-layer, two-head model keeps the [H, L, L] tensors at 134 MB each
as_family_ref_test(llama_L4096 4096 all --family llama --layers 1 --heads 2 --kv-heads 1
                   --hidden 32 --inner 48 --positions 4096 --tokens 4200)
# qwen2: q/k/v biases, GQA 2, three BF16 shards behind model.safetensors.index.json
as_family_ref_test(qwen2_shards_bf16_L64 64 all --family qwen2 --layers 3 --heads 4 --kv-heads 2
                   --shards 3 --dtype bf16)

# The synth presets of the families (attnsweep synth --preset, src/model/synth_families.c):
# the written directories load, and their forwards match the references.
foreach(p pythia-tiny llama-tiny pythia-70m)
  add_test(NAME synth_${p}
           COMMAND attnsweep synth --preset ${p} --seed 1 --vocab none --out ${CMAKE_BINARY_DIR}/models/${p} --force)
  set_tests_properties(synth_${p} PROPERTIES FIXTURES_SETUP model_${p})
endforeach()
function(as_family_synth_test name preset L layers)
  set(out ${AS_FAM_DIR}/${name}.h5)
  add_test(NAME family_ref_${name}
           COMMAND /bin/sh -c "\"$1\" dump --model \"$2\" --tokens \"$3\" --length $4 --window-start 5 --layers $5 --out \"$6\" && \"$7\" \"$8\" compare --model \"$2\" --dump \"$6\" && rm -f \"$6\""
                   sh $<TARGET_FILE:attnsweep> ${CMAKE_BINARY_DIR}/models/${preset}
                   ${CMAKE_BINARY_DIR}/forward-tests/tokens.txt ${L} ${layers} ${out} ${AS_PYTHON} ${AS_FAM_IO})
  set_tests_properties(family_ref_${name} PROPERTIES LABELS reference TIMEOUT 300
                       FIXTURES_REQUIRED "model_${preset};forward_tokens"
                       ENVIRONMENT "OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
endfunction()
as_family_synth_test(synth_pythia-tiny_L128 pythia-tiny 128 all)
as_family_synth_test(synth_llama-tiny_L128 llama-tiny 128 all)
as_family_synth_test(synth_pythia-70m_L64 pythia-70m 64 0,5)
