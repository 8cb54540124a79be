"""Composes Llama-3 step times from NVIDIA AIConfigurator's measured vLLM 0.24.0 kernels (H100/H200 SXM).

Not run at build, test or run time: it documents how `llama3_fp8_and_tp2_step_times_composed.derived.csv` was
made from the upstream kernel database (the project's shared copy of `kernel_db/`, Apache-2.0). One step is
  layers x (QKV + O + gate_up + down GEMMs + attention + 2 all-reduces) + LM head (BF16, as vLLM keeps it).
GEMMs: the `gemm_dtype` rows (`bfloat16` or per-tensor `fp8`), linear in n and k between grid points and
proportional beyond the largest. Attention: FlashAttention-3 rows, KV cache in BF16 for BF16 steps and in
FP8 for FP8 steps (fleetsim's `fp8` means FP8 weights and FP8 KV cache), linear in the context length.
All-reduce: vLLM custom all-reduce under CUDA graphs, linear in log(message size). The same recipe
reproduces the shared BF16 file (`llama3_step_times_composed_from_kernel_db.derived.csv`) within 0.2% for
70B and 2.2% for 8B (H100/H200). Needs python3 with polars and numpy.
"""
import polars as pl, numpy as np, sys, math
D='/work/shared/data/aiconfigurator/kernel_db'
MODELS={'llama3-8b':dict(L=32,h=4096,H=32,KV=8,d=128,I=14336,V=128256),
        'llama3-70b':dict(L=80,h=8192,H=64,KV=8,d=128,I=28672,V=128256)}
cache={}
def tables(gpu):
    if gpu in cache: return cache[gpu]
    g=pl.read_parquet(f'{D}/{gpu}/gemm/vllm/0.24.0/gemm_perf.parquet')
    ga=pl.read_parquet(f'{D}/{gpu}/attention/vllm/0.24.0/generation_attention_perf.parquet')
    ca=pl.read_parquet(f'{D}/{gpu}/attention/vllm/0.24.0/context_attention_perf.parquet')
    ar=pl.read_parquet(f'{D}/{gpu}/comm/vllm/0.24.0/custom_allreduce_perf.parquet')
    gem={}
    for dt in ['bfloat16','fp8','fp8_block']:
        s=g.filter(pl.col('gemm_dtype')==dt)
        gem[dt]={(m,n,k):l for m,n,k,l in zip(s['m'],s['n'],s['k'],s['latency'])}
    cache[gpu]=(gem,ga,ca,ar); return cache[gpu]
NS=[32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 16384, 51200, 65536]
def bracket(x,grid):
    if x in grid: return [(x,1.0)]
    if x>grid[-1]: return [(grid[-1], x/grid[-1])]  # proportional beyond the grid
    i=next(i for i,v in enumerate(grid) if v>x); a,b=grid[i-1],grid[i]; w=(x-a)/(b-a)
    return [(a,1-w),(b,w)]
def gemm(gem,dt,m,n,k):
    # linear in n and k between grid points, proportional beyond the largest
    t=0
    for nn,wn in bracket(n,NS):
        for kk,wk in bracket(k,NS):
            t+=wn*wk*gem[dt][(m,nn,kk)]
    return t
def interp1(xs,ys,x):
    if x>xs[-1] and len(xs)>1:  # linear extrapolation beyond the largest measured point
        return float(ys[-1]+(ys[-1]-ys[-2])*(x-xs[-1])/(xs[-1]-xs[-2]))
    return float(np.interp(x,xs,ys))
def gen_attn(ga,B,ctx,Hq,Hkv,kv):
    s=ga.filter((pl.col('batch_size')==B)&(pl.col('num_heads')==Hq)&(pl.col('num_key_value_heads')==Hkv)&(pl.col('kv_cache_dtype')==kv)&(pl.col('kernel_source')=='vllm_flash_attn_fa3')&(pl.col('head_dim')==128)&(pl.col('window_size')==0)).sort('step')
    assert len(s)>0,(B,Hq,Hkv)
    return interp1(s['step'].to_numpy(),s['latency'].to_numpy(),ctx)
def ctx_attn(ca,isl,Hq,Hkv,kv):
    s=ca.filter((pl.col('batch_size')==1)&(pl.col('num_heads')==Hq)&(pl.col('num_key_value_heads')==Hkv)&(pl.col('kv_cache_dtype')==kv)&(pl.col('kernel_source')=='vllm_flash_attn_fa3')&(pl.col('head_dim')==128)&(pl.col('window_size')==0)&(pl.col('step')==0)).sort('isl')
    assert len(s)>0,(isl,Hq,Hkv)
    return interp1(s['isl'].to_numpy(),s['latency'].to_numpy(),isl)
def allreduce(ar,tp,elems):
    if tp==1: return 0.0
    s=ar.filter((pl.col('num_gpus')==tp)&(pl.col('backend')=='vllm_graph')&(pl.col('allreduce_dtype')=='bfloat16')).sort('message_size')
    return interp1(np.log(s['message_size'].to_numpy()),s['latency'].to_numpy(),math.log(elems))
def step(gpu,model,tp,dt,tokens,attn,lm_rows,lm_dt='bfloat16'):
    gem,ga,ca,ar=tables(gpu); M=MODELS[model]
    h,d=M['h'],M['d']; Hq=M['H']//tp; Hkv=max(1,M['KV']//tp)
    qkv=gemm(gem,dt,tokens,(Hq+2*Hkv)*d,h)
    o=gemm(gem,dt,tokens,h,Hq*d)
    gu=gemm(gem,dt,tokens,2*M['I']//tp,h)
    dn=gemm(gem,dt,tokens,h,M['I']//tp)
    kv='fp8' if dt=='fp8' else 'bfloat16'
    layer=qkv+o+gu+dn+attn(ga,ca,Hq,Hkv,kv)+2*allreduce(ar,tp,tokens*h)
    lm=gemm(gem,lm_dt,lm_rows,M['V']//tp,h)
    return M['L']*layer+lm
def prefill(gpu,model,tp,dt,isl,**kw):
    return step(gpu,model,tp,dt,isl,lambda ga,ca,Hq,Hkv,kv: ctx_attn(ca,isl,Hq,Hkv,kv),1,**kw)
def decode(gpu,model,tp,dt,B,ctx,**kw):
    return step(gpu,model,tp,dt,B,lambda ga,ca,Hq,Hkv,kv: gen_attn(ga,B,ctx,Hq,Hkv,kv),B,**kw)
