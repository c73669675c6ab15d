"""A table's .tex typesets every header and cell literally: LaTeX's special characters in method
names (kv_quant), budgets (5.33x), notes ("95%", "a & b") and headers are escaped, and the line
the HTML page reads back (headers, groups, footnote) round-trips."""
import re

from loopkv.report import tables

SPECIAL = "&%$#_{}~^\\"
NASTY = r"a_b & 95% $5 #1 {x} ~y ^z \w <= >"
SPEC = tables.TableSpec(columns=[("name", "name"), ("budget", "budget_x & co"), ("acc", "acc (%)\nn=6"),
                                 ("note", "note #")],
                        csv_extra=["n"], group_key="budget", proportions={"acc": "n"})
ROWS = [{"name": "kv_quant", "budget": "5.33x", "acc": 0.5, "n": 6, "note": NASTY},
        {"name": "lla2d", "budget": "21.33x", "acc": None, "n": 6, "note": "plain"}]


def body_cells(tex: str) -> list[list[str]]:
    """The header and every row of the tabular, split into cells at the column separators."""
    inside = tex.split("\\begin{tabular}")[1].split("\\end{tabular}")[0].splitlines()[1:]
    return [line.removesuffix(" \\\\").split(" & ") for line in inside if line and line != "\\hline"]


def unescaped(cell: str) -> str:
    """What is left of a cell after taking out every escape write_tex may write: nothing special."""
    for escape in sorted(tables.TEX_SPECIAL.values(), key=len, reverse=True):
        cell = cell.replace(escape, "")
    return "".join(c for c in cell if c in SPECIAL)


def test_every_header_and_cell_is_escaped(tmp_path):
    path = tmp_path / "t.tex"
    tables.write_tex(ROWS, SPEC, "note: 95% of n & more", path)
    tex = path.read_text()
    rows = body_cells(tex)
    assert len(rows) == 3 and all(len(r) == 4 for r in rows), rows   # an unescaped & would add a column
    assert all(unescaped(cell) == "" for row in rows for cell in row), rows
    head, first = rows[0], rows[1]
    assert head == ["name", r"budget\_x \& co", r"acc (\%) n=6", r"note \#"]
    assert first[0] == r"kv\_quant" and first[1] == "5.33x" and first[2] == "0.500 [0.19, 0.81]"
    assert first[3] == (r"a\_b \& 95\% \$5 \#1 \{x\} \textasciitilde{}y \textasciicircum{}z \textbackslash{}w "
                        r"\textless{}= \textgreater{}")
    assert tex.count("\\hline") == 4   # top, under the header, between the two budgets, bottom


def test_the_footnote_and_headers_come_back_for_the_html_page(tmp_path):
    path = tmp_path / "t.tex"
    tables.write_tex(ROWS, SPEC, "note: 95% of n & more\nsecond line", path)
    meta, note = tables.read_tex_meta(path)
    assert meta["columns"] == dict(SPEC.columns) and meta["group"] == "budget"
    assert note == "note: 95% of n & more second line"
    assert all(re.fullmatch(r"%.*", line) for line in path.read_text().splitlines()[-1:])   # still a comment


def test_a_dollar_in_a_path_is_printed_not_parsed_as_math(tmp_path):
    """Notes and cells carry config and result text (a checkpoint path, a task id): matplotlib would
    parse "$...$" as math, and "$HOME/x_$" fails to parse, so the table could not be drawn."""
    from loopkv.report import tables

    spec = tables.TableSpec(columns=[("method", "method"), ("where", "where")])
    rows = [{"method": "full", "where": "ckpt/$HOME/x_$y"}]
    tables.write_pdf(rows, spec, "Teacher: the checkpoint /data/$HOME/x_$y", "t $x_$", tmp_path / "t.pdf")
    assert (tmp_path / "t.pdf").read_bytes().startswith(b"%PDF")
