//! The page's inline style and script (no network fetches).

/// Inline CSS.
pub(crate) const CSS: &str = r#"
:root{--bg:#fbfbfd;--fg:#1d2330;--mut:#6b7385;--line:#e3e6ee;--bad:#d62728;--card:#fff}
*{box-sizing:border-box}
body{margin:0;font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--fg)}
header{padding:14px 24px;background:#1d2330;color:#fff}
header h1{margin:0;font-size:18px;font-weight:600}
header .sub{color:#b9c0d0;margin-top:2px}
main{padding:12px 24px 40px}
h2{font-size:15px;margin:22px 0 8px}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px;margin-bottom:12px}
.note{color:var(--mut);font-size:12px}
.strag{border-left:4px solid var(--bad)}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:3px 8px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{color:var(--mut);font-weight:600;background:#f4f5f9}
td:first-child,th:first-child{text-align:left}
tr.bad td{color:var(--bad)}
.controls{display:flex;gap:6px;align-items:center;margin-bottom:6px}
.controls button{border:1px solid var(--line);background:#fff;border-radius:4px;padding:1px 9px;cursor:pointer;font-size:13px}
.tl{display:flex;border:1px solid var(--line);border-radius:6px;background:#fff;overflow:hidden}
.labels{flex:0 0 150px;border-right:1px solid var(--line);background:#f7f8fb}
.labels .axis{height:22px;border-bottom:1px solid var(--line)}
.label{padding:0 8px;display:flex;align-items:center;border-bottom:1px solid var(--line);font-size:12px;white-space:nowrap;overflow:hidden}
.label.straggler{color:var(--bad);font-weight:700}
.scroll{flex:1;overflow-x:auto;overflow-y:hidden}
.inner{position:relative;min-width:100%}
.inner .axis{position:relative;height:22px;border-bottom:1px solid var(--line)}
.tick{position:absolute;top:0;height:100%;border-left:1px solid var(--line);padding-left:3px;font-size:10px;color:var(--mut)}
.lane{position:relative;border-bottom:1px solid var(--line)}
.lane.straggler{background:#fff3f3}
.s{position:absolute;height:14px;border-radius:2px;font-size:10px;line-height:14px;color:#fff;overflow:hidden;white-space:nowrap;padding-left:2px;cursor:default;min-width:1px}
.s:hover{filter:brightness(1.15);outline:1px solid #000}
.s.slow{outline:2px solid var(--bad);outline-offset:-1px}
.s.trunc{background-image:repeating-linear-gradient(45deg,rgba(255,255,255,.45) 0 3px,transparent 3px 7px)}
.s.err{border:2px solid var(--bad)}
.s.wait{opacity:.45;background-image:repeating-linear-gradient(-45deg,rgba(255,255,255,.7) 0 2px,transparent 2px 5px)}
.region{position:absolute;top:0;bottom:0;background:rgba(59,74,102,.13);border-left:1px dashed #8d97ad;border-right:1px dashed #8d97ad}
.sw.region-sw{background:rgba(59,74,102,.16);border:1px dashed #8d97ad}
.whole .legend{margin:0 0 6px}
.whole .s.k-eval,.whole .s.k-ckpt,.whole .s.k-init{min-width:4px}
.panel h3 .note{font-weight:400}
.s.culprit{outline:2px solid var(--bad);outline-offset:0;box-shadow:0 0 0 3px rgba(214,39,40,.25)}
.diag .verdict{font-size:14px;font-weight:600;margin:2px 0 8px}
.diag td.ev{white-space:normal;text-align:left;color:var(--fg)}
#tip{position:absolute;display:none;pointer-events:none;background:#1d2330;color:#fff;padding:6px 8px;border-radius:5px;font:12px/1.4 ui-monospace,monospace;white-space:pre;z-index:10;max-width:560px;overflow:hidden}
.panels{display:grid;grid-template-columns:repeat(auto-fill,minmax(460px,1fr));gap:12px}
.panel h3{margin:0 0 4px;font-size:13px}
svg.metric,svg.heat{width:100%;height:auto;display:block}
svg.heat rect:hover{stroke:#000;stroke-width:1}
svg.metric polyline{fill:none;stroke:#7d8fb3;stroke-width:1;opacity:.55}
svg.metric polyline.straggler{stroke:var(--bad);stroke-width:2;opacity:1}
svg.metric circle{fill:#7d8fb3}
svg.metric circle.straggler{fill:var(--bad)}
svg.metric text{font-size:10px;fill:#6b7385}
svg.metric line{stroke:#e3e6ee}
.legend{display:flex;gap:6px;align-items:center;font-size:12px;margin-top:6px;flex-wrap:wrap}
.sw{display:inline-block;width:12px;height:10px;border-radius:2px}
"#;

/// Inline script: tooltip on hover, zoom per timeline section.
pub(crate) const JS: &str = r#"
(function(){
const tip=document.getElementById('tip');
document.addEventListener('mouseover',e=>{
  const s=e.target.closest&&e.target.closest('.s');
  if(!s){tip.style.display='none';return;}
  tip.textContent=s.dataset.n+'  '+s.dataset.d+'  (rank '+s.closest('.lane').dataset.rank+')\n'+s.dataset.a;
  tip.style.display='block';
});
document.addEventListener('mousemove',e=>{
  if(tip.style.display!=='block')return;
  const x=Math.min(e.pageX+14,window.scrollX+window.innerWidth-tip.offsetWidth-8);
  tip.style.left=x+'px';tip.style.top=(e.pageY+14)+'px';
});
document.querySelectorAll('.section').forEach(sec=>{
  const inner=sec.querySelector('.inner'),scroll=sec.querySelector('.scroll');
  let z=1;
  const set=(nz,fx)=>{
    const f=fx===undefined?0.5:fx;
    const at=(scroll.scrollLeft+scroll.clientWidth*f)/inner.offsetWidth;
    z=Math.max(1,Math.min(nz,400));
    inner.style.width=(z*100)+'%';
    scroll.scrollLeft=at*inner.offsetWidth-scroll.clientWidth*f;
    sec.querySelector('.zl').textContent=z.toFixed(1)+'×';
  };
  sec.querySelector('.zin').onclick=()=>set(z*2);
  sec.querySelector('.zout').onclick=()=>set(z/2);
  sec.querySelector('.zreset').onclick=()=>set(1);
  sec.querySelectorAll('.zfit').forEach(b=>{b.onclick=()=>{
    const [a,e]=b.dataset.fit.split(',').map(Number);
    const w=Math.max(e-a,0.0025);
    set(90/w);
    scroll.scrollLeft=(a-w*0.05)/100*inner.offsetWidth;
  };});
  scroll.addEventListener('wheel',e=>{
    if(!(e.ctrlKey||e.metaKey||e.altKey))return;
    e.preventDefault();
    const r=scroll.getBoundingClientRect();
    set(z*(e.deltaY<0?1.25:0.8),(e.clientX-r.left)/r.width);
  },{passive:false});
});
})();
"#;
