// SPDX-License-Identifier: GPL-2.0
/*
 * harness-kconfig-dump: load a kernel tree's Kconfig with the tree's own
 * parser (linked against scripts/kconfig/*.o of that tree, built by any
 * `make *config`), read a .config the way `make olddefconfig` does, and print
 * the symbols it is asked for as JSON: value, type, prompts and the
 * dependency, select and default expressions with the value of every node.
 *
 * harness/kconfig/tool.py reads this to explain why a requested option did
 * not stick. Written for the harness; it uses only the interfaces declared in
 * scripts/kconfig/{lkc.h,expr.h,internal.h}.
 *
 * usage: harness-kconfig-dump KCONFIG < commands   (environment as `make` sets it)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lkc.h"
#include "internal.h"

static void json_string(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = *s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static const char *tri_name(tristate t)
{
	return t == yes ? "y" : t == mod ? "m" : "n";
}

static void sym_name(const struct symbol *sym)
{
	json_string(sym->name ? sym->name : "<choice>");
}

/* {"sym": name, "tri": value as a tristate, "value": string value, "const": bool} */
static void json_sym(struct symbol *sym)
{
	sym_calc_value(sym);
	printf("{\"sym\":");
	sym_name(sym);
	printf(",\"tri\":\"%s\",\"value\":", tri_name(sym->curr.tri));
	json_string(sym_get_string_value(sym));
	printf(",\"const\":%s}", sym->flags & SYMBOL_CONST ? "true" : "false");
}

/* {"op", "tri": value of this node, "left", "right" (absent for "!")};
 * null for "no condition" (= y) */
static void json_expr(struct expr *e)
{
	static const char *const ops[] = {
		[E_NONE] = "none", [E_OR] = "||", [E_AND] = "&&", [E_NOT] = "!",
		[E_EQUAL] = "=", [E_UNEQUAL] = "!=", [E_LTH] = "<", [E_LEQ] = "<=",
		[E_GTH] = ">", [E_GEQ] = ">=", [E_SYMBOL] = "sym", [E_RANGE] = "range",
	};

	if (!e) {
		printf("null");
		return;
	}
	if (e->type == E_SYMBOL) {
		json_sym(e->left.sym);
		return;
	}
	/* a range has no truth value of its own */
	printf("{\"op\":\"%s\",\"tri\":\"%s\",\"left\":", ops[e->type],
	       e->type == E_RANGE ? "y" : tri_name(expr_calc_value(e)));
	switch (e->type) {
	case E_OR:
	case E_AND:
		json_expr(e->left.expr);
		printf(",\"right\":");
		json_expr(e->right.expr);
		break;
	case E_NOT:
		json_expr(e->left.expr);
		break;
	default:	/* comparisons and ranges: two symbols */
		json_sym(e->left.sym);
		printf(",\"right\":");
		json_sym(e->right.sym);
		break;
	}
	putchar('}');
}

static void json_props(struct symbol *sym, enum prop_type type, const char *key)
{
	struct property *prop;
	int first = 1;

	printf(",\"%s\":[", key);
	for (prop = sym->prop; prop; prop = prop->next) {
		/* `menuconfig FOO` prompts are P_MENU: both are prompts here */
		if (prop->type != type &&
		    !(type == P_PROMPT && prop->type == P_MENU))
			continue;
		printf("%s{\"at\":", first ? "" : ",");
		printf("\"%s:%d\"", prop->filename, prop->lineno);
		if (type == P_PROMPT) {
			printf(",\"text\":");
			json_string(prop->text);
			printf(",\"if\":");
			json_expr(prop->visible.expr);
		} else {
			printf(",\"expr\":");
			json_expr(prop->expr);
			printf(",\"if\":");
			json_expr(prop->visible.expr);
		}
		putchar('}');
		first = 0;
	}
	putchar(']');
}

static void dump_symbol(struct symbol *sym)
{
	struct menu *menu, *choice;
	int first = 1;

	sym_calc_value(sym);
	printf("{\"name\":");
	sym_name(sym);
	printf(",\"type\":\"%s\",\"value\":", sym_type_name(sym->type));
	json_string(sym_get_string_value(sym));
	printf(",\"tri\":\"%s\",\"visible\":\"%s\"", tri_name(sym->curr.tri),
	       tri_name(sym->visible));
	printf(",\"user\":");
	if (sym->flags & SYMBOL_DEF_USER) {
		if (sym->type == S_BOOLEAN || sym->type == S_TRISTATE)
			printf("\"%s\"", tri_name(sym->def[S_DEF_USER].tri));
		else
			json_string(sym->def[S_DEF_USER].val);
	} else {
		printf("null");
	}
	printf(",\"defined\":[");
	list_for_each_entry(menu, &sym->menus, link) {
		printf("%s\"%s:%d\"", first ? "" : ",", menu->filename, menu->lineno);
		first = 0;
	}
	putchar(']');
	choice = sym_get_choice_menu(sym);
	printf(",\"choice\":");
	if (choice && choice->prompt) {
		struct symbol *active = sym_calc_choice(choice);

		printf("{\"prompt\":");
		json_string(choice->prompt->text);
		printf(",\"at\":\"%s:%d\",\"active\":", choice->filename, choice->lineno);
		if (active)
			sym_name(active);
		else
			printf("null");
		putchar('}');
	} else {
		printf("null");
	}
	printf(",\"depends\":");
	json_expr(sym->dir_dep.expr);
	printf(",\"selected_by\":");
	json_expr(sym->rev_dep.expr);
	printf(",\"implied_by\":");
	json_expr(sym->implied.expr);
	json_props(sym, P_PROMPT, "prompts");
	json_props(sym, P_DEFAULT, "defaults");
	json_props(sym, P_RANGE, "ranges");
	printf("}\n");
}

static void quiet(const char *s)
{
	(void)s;
}

/*
 * who has `select NAME`: [{"name": selector, "at": "file:line", "if": the
 * select's condition (the selector's dependencies and its `if`)}, ...]
 */
static void dump_selectors(const char *name)
{
	struct symbol *sym;
	struct property *prop;
	int first = 1;

	putchar('[');
	for_all_symbols(sym) {
		for_all_properties(sym, prop, P_SELECT) {
			struct expr *e = prop->expr;

			if (!sym->name || !e || e->type != E_SYMBOL ||
			    !e->left.sym->name || strcmp(e->left.sym->name, name))
				continue;
			printf("%s{\"name\":", first ? "" : ",");
			json_string(sym->name);
			printf(",\"at\":\"%s:%d\",\"if\":", prop->filename, prop->lineno);
			json_expr(prop->visible.expr);
			putchar('}');
			first = 0;
		}
	}
	printf("]\n");
}

/*
 * One command per line on stdin, one JSON line per answer on stdout:
 *   read PATH      read a .config (or base + fragments) as olddefconfig does
 *   sym NAME       the symbol's record, or null
 *   selectors NAME the symbols that select NAME
 */
int main(int argc, char **argv)
{
	char line[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: %s KCONFIG < commands\n", argv[0]);
		return 2;
	}
	conf_set_message_callback(quiet);
	conf_parse(argv[1]);
	printf("{\"ready\":true}\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "read ", 5)) {
			int failed = conf_read(line + 5);

			sym_clear_all_valid();
			printf("{\"ok\":%s}\n", failed ? "false" : "true");
		} else if (!strncmp(line, "sym ", 4)) {
			struct symbol *sym = sym_find(line + 4);

			if (sym && sym->name)
				dump_symbol(sym);
			else
				printf("null\n");
		} else if (!strncmp(line, "selectors ", 10)) {
			dump_selectors(line + 10);
		} else if (!strcmp(line, "quit")) {
			break;
		} else {
			printf("{\"error\":\"unknown command\"}\n");
		}
		fflush(stdout);
	}
	return 0;
}
